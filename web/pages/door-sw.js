// The door's service worker: the page's own files are kept in the cache, so the scanner opens
// without the network. Network first: online, every page of its scope (the organiser's too, which
// shares sign-in.js and pages.css) gets today's files; the cache answers when the network fails
// or hangs past 3 s. The API's routes are never cached.
const SHELL = 'door-shell-v3';
const NETWORK_PATIENCE_MS = 3000;
const FILES = ['door.html', 'door.js', 'sign-in.js', 'pages.css', 'jsQR.js', 'door.webmanifest', 'door-icon.svg'];

self.addEventListener('install', (event) => {
  event.waitUntil(caches.open(SHELL).then((cache) => cache.addAll(FILES)).then(() => self.skipWaiting()));
});

self.addEventListener('activate', (event) => {
  event.waitUntil(
    caches.keys()
      .then((names) => Promise.all(names.filter((n) => n !== SHELL).map((n) => caches.delete(n))))
      .then(() => self.clients.claim()),
  );
});

self.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url);
  const name = url.pathname.split('/').pop();
  if (event.request.method !== 'GET' || url.origin !== self.location.origin || !FILES.includes(name)) return;
  event.respondWith(
    caches.open(SHELL).then(async (cache) => {
      try {
        const reply = await fetch(event.request, { signal: AbortSignal.timeout(NETWORK_PATIENCE_MS) });
        if (reply.ok) {
          cache.put(name, reply.clone());
          return reply;
        }
        return (await cache.match(name)) || reply;
      } catch {
        return (await cache.match(name)) || Response.error();
      }
    }),
  );
});
