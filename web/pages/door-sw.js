// The door's service worker: the page's own files are kept in the cache, so the scanner opens
// without the network. Served from the cache at once and refreshed behind (stale while
// revalidate); the API's routes are never cached.
const SHELL = 'door-shell-v2';
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
      const kept = await cache.match(name);
      const fresh = fetch(event.request)
        .then((reply) => {
          if (reply.ok) cache.put(name, reply.clone());
          return reply;
        })
        .catch(() => kept);
      return kept || fresh;
    }),
  );
});
