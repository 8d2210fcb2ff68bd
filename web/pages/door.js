// The door's scanner: checks a ticket pass's Ed25519 signature here, offline, with the event's
// public key fetched once (WebCrypto), shows green or red with the ticket number, and records the
// check-in. Online, the check-in route decides (a second scan at any door is 409). Offline, the
// device keeps the check-in, refuses a second scan of the same pass here, and sends it with the
// time it happened when the network returns; a pass another door had checked in first comes back
// as a conflict, shown here and counted in the audit (docs/DESIGN.md section 11).
//
// Kept in this device's localStorage, per event: the public keys, and every pass let in here.

import { session as open, problem, signInForm } from './sign-in.js';

const session = open(localStorage, 'door');
const $ = (id) => document.getElementById(id);
const EVENT = 'ticket-grab.door.event';
const SYNC_EVERY_MS = 5000;
let event = localStorage.getItem(EVENT);
let syncing = false;

const stored = (name, fallback) => JSON.parse(localStorage.getItem(`ticket-grab.door.${event}.${name}`) || fallback);
const store = (name, value) => localStorage.setItem(`ticket-grab.door.${event}.${name}`, JSON.stringify(value));

function bytes(base64url) {
  const b64 = base64url.replace(/-/g, '+').replace(/_/g, '/');
  return Uint8Array.from(atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4)), (c) => c.charCodeAt(0));
}

/**
 * The event's pass keys (the current one, the next while a rotation is staged, the previous):
 * fetched when the door is set up and kept on this device, so passes check offline; fetched again
 * when a pass names a key the device does not have (the key was rotated since).
 */
async function passKeys() {
  return stored('keys', 'null') || fetchKeys();
}

async function fetchKeys() {
  const reply = await session.api(`/events/${encodeURIComponent(event)}/pass-key`);
  if (!reply.ok) throw new Error(await problem(reply));
  const ring = await reply.json();
  const keys = [{ id: ring.key_id, key: ring.public_key }];
  for (const other of [ring.next, ring.previous]) {
    if (other) keys.push({ id: other.key_id, key: other.public_key });
  }
  store('keys', keys);
  return keys;
}

/**
 * What a pass says, when its signature holds: `TP2.<payload>.<signature>`, the payload base64url
 * JSON {k: key id, e: event, o: order, n: ticket number}, the signature Ed25519 over
 * "ticket-pass-v2\n" + the payload as written. `TP1` passes (no key id) try each key.
 */
async function verify(text, keys) {
  const refused = (why) => ({ ok: false, why });
  const version = text.slice(0, 4);
  if (text.length > 1024 || (version !== 'TP2.' && version !== 'TP1.')) return refused('not a ticket pass');
  const [payload, signature, extra] = text.slice(4).split('.');
  if (!payload || !signature || extra !== undefined) return refused('not a ticket pass');
  let claims, sig;
  try {
    claims = JSON.parse(new TextDecoder().decode(bytes(payload)));
    sig = bytes(signature);
  } catch {
    return refused('not a ticket pass');
  }
  if (sig.length !== 64 || typeof claims.e !== 'string' || typeof claims.o !== 'string' || !Number.isInteger(claims.n)) {
    return refused('not a ticket pass');
  }
  const v1 = version === 'TP1.';
  const candidates = v1 ? keys : keys.filter((k) => k.id === claims.k);
  if (!candidates.length) return { ...refused('signed with a key this event does not have'), unknownKey: true };
  const message = new TextEncoder().encode((v1 ? 'ticket-pass-v1\n' : 'ticket-pass-v2\n') + payload);
  for (const k of candidates) {
    const key = await crypto.subtle.importKey('raw', bytes(k.key), { name: 'Ed25519' }, false, ['verify']);
    if (await crypto.subtle.verify({ name: 'Ed25519' }, key, sig, message)) {
      return { ok: true, event: claims.e, order: claims.o, ticketNo: claims.n };
    }
  }
  return refused('the signature does not match: a forged or altered pass');
}

function verdict(good, headline, ticketNo, detail) {
  const box = $('verdict');
  box.className = good ? 'pass' : 'fail';
  $('verdict-text').textContent = headline;
  $('verdict-ticket').textContent = ticketNo ? `Ticket ${ticketNo}` : '';
  $('verdict-detail').textContent = detail || '';
  box.dataset.result = good ? 'admitted' : 'refused';
}

const when = (iso) => new Date(iso).toLocaleTimeString();

async function check(text) {
  text = text.trim();
  if (!text) return;
  let keys;
  try {
    keys = await passKeys();
  } catch (e) {
    return verdict(false, 'No key yet', '', `The event's public key could not be fetched: ${e.message}`);
  }
  let pass = await verify(text, keys);
  if (pass.unknownKey) {
    // A key published since this device fetched its keys: fetch them again (offline, refused).
    try {
      pass = await verify(text, await fetchKeys());
    } catch {
      // no network: the refusal stands
    }
  }
  if (!pass.ok) return verdict(false, 'Refused', '', pass.why);
  if (pass.event !== event) return verdict(false, 'Refused', pass.ticketNo, `a pass of another event (${pass.event})`);
  const scans = stored('scans', '{}');
  if (scans[pass.order]) {
    return verdict(false, 'Already in', pass.ticketNo, `let in at this door at ${when(scans[pass.order].at)}`);
  }
  let reply = null;
  try {
    reply = await session.api(`/admin/events/${encodeURIComponent(event)}/check-in`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ pass: text }),
    });
  } catch {
    reply = null; // no network
  }
  if (reply === null || reply.status >= 500) {
    // The signature holds and this device has not let the pass in: in, and sent later.
    scans[pass.order] = { ticketNo: pass.ticketNo, pass: text, at: new Date().toISOString(), synced: false };
    store('scans', scans);
    verdict(true, 'Let in', pass.ticketNo, 'offline: kept on this device, sent when the network returns');
    return showDevice();
  }
  if (reply.ok) {
    const body = await reply.json();
    scans[pass.order] = { ticketNo: pass.ticketNo, at: body.checked_in_at, synced: true };
    store('scans', scans);
    verdict(true, 'Let in', pass.ticketNo, '');
    return showDevice();
  }
  const p = await reply.clone().json().catch(() => ({}));
  switch (p.code) {
    case 'ALREADY_CHECKED_IN':
      return verdict(false, 'Already in', pass.ticketNo, `checked in at ${when(p.checked_in_at)}`);
    case 'TICKET_CANCELLED':
      return verdict(false, 'Cancelled', pass.ticketNo, 'this ticket was cancelled');
    case 'CHECK_IN_CLOSED':
      return verdict(false, 'Not open', pass.ticketNo, await problem(reply));
    default:
      if (reply.status === 401) return verdict(false, 'Sign in again', '', 'the staff token was refused');
      if (reply.status === 403) return verdict(false, 'Not your door', '', 'this token is not staff of this event');
      return verdict(false, 'Refused', pass.ticketNo, await problem(reply));
  }
}

/** Sends the check-ins made offline, oldest first; stops at the first that cannot be sent. */
async function sync() {
  if (syncing || !event) return;
  syncing = true;
  try {
    const pending = Object.entries(stored('scans', '{}')).filter(([, s]) => !s.synced).sort((a, b) => (a[1].at < b[1].at ? -1 : 1));
    for (const [order, scan] of pending) {
      let reply;
      try {
        reply = await session.api(`/admin/events/${encodeURIComponent(event)}/check-in`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ pass: scan.pass, admitted_offline_at: scan.at }),
        });
      } catch {
        break;
      }
      if (reply.status >= 500 || reply.status === 401 || reply.status === 429) break;
      const p = reply.ok ? {} : await reply.json().catch(() => ({}));
      const scans = stored('scans', '{}');
      const done = { ...scans[order], synced: true };
      delete done.pass;
      // The server has this very check-in (a reply lost before): no conflict.
      const same = p.code === 'ALREADY_CHECKED_IN' && Date.parse(p.checked_in_at) === Date.parse(scan.at);
      if (!reply.ok && !same) {
        done.conflict = p.code === 'ALREADY_CHECKED_IN' ? `already checked in at ${when(p.checked_in_at)}` : p.title || `HTTP ${reply.status}`;
      }
      scans[order] = done;
      store('scans', scans);
    }
  } finally {
    syncing = false;
    showDevice();
  }
}

function showDevice() {
  const scans = Object.values(stored('scans', '{}'));
  $('pending-count').textContent = scans.filter((s) => !s.synced).length;
  $('scanned-count').textContent = scans.length;
  const conflicts = scans.filter((s) => s.conflict);
  $('conflict-alert').classList.toggle('hidden', !conflicts.length);
  $('conflict-alert').textContent = conflicts.length
    ? `${conflicts.length} ${conflicts.length === 1 ? 'pass' : 'passes'} let in here offline had been let in elsewhere, or cancelled: see below.`
    : '';
  $('conflicts').replaceChildren(...conflicts.map((s) => {
    const tr = document.createElement('tr');
    for (const cell of [s.ticketNo, when(s.at), s.conflict]) tr.append(Object.assign(document.createElement('td'), { textContent: cell }));
    return tr;
  }));
}

function showNetwork() {
  $('network').textContent = navigator.onLine ? 'Online' : 'Offline: passes are checked here and sent later';
}

/** The camera: the browser's BarcodeDetector where it has one, else jsQR on each frame. */
async function scanWithCamera() {
  const video = $('camera');
  const stream = await navigator.mediaDevices.getUserMedia({ video: { facingMode: 'environment' } });
  video.srcObject = stream;
  video.classList.remove('hidden');
  await video.play();
  // The browser's own detector where it reads QR codes (not every platform's does), else jsQR.
  const native = 'BarcodeDetector' in window && (await window.BarcodeDetector.getSupportedFormats()).includes('qr_code');
  const detector = native ? new window.BarcodeDetector({ formats: ['qr_code'] }) : null;
  const canvas = document.createElement('canvas');
  const context = canvas.getContext('2d', { willReadFrequently: true });
  let last = '';
  const frame = async () => {
    if (!video.srcObject) return;
    let text = null;
    if (detector) {
      const codes = await detector.detect(video).catch(() => []);
      text = codes[0]?.rawValue ?? null;
    } else if (video.videoWidth && window.jsQR) {
      canvas.width = video.videoWidth;
      canvas.height = video.videoHeight;
      context.drawImage(video, 0, 0);
      const image = context.getImageData(0, 0, canvas.width, canvas.height);
      text = window.jsQR(image.data, image.width, image.height, { inversionAttempts: 'dontInvert' })?.data ?? null;
    }
    if (text && text !== last) {
      last = text;
      await check(text);
      setTimeout(() => { last = ''; }, 3000);
    }
    requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
}

function startScanner() {
  $('setup').classList.add('hidden');
  $('scanner').classList.remove('hidden');
  $('event-name').textContent = event;
  showDevice();
  sync();
}

$('setup-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  event = $('event').value.trim();
  if ($('token').value.trim()) session.set($('token').value);
  $('token').value = '';
  if (!session.token()) return ($('setup-status').textContent = 'A staff token is needed.');
  localStorage.setItem(EVENT, event);
  try {
    await passKeys();
  } catch (err) {
    $('setup-status').textContent = `The event's public key could not be fetched: ${err.message}`;
    return;
  }
  startScanner();
});
$('pass-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  await check($('pass').value);
  $('pass').value = '';
  $('pass').focus();
});
$('camera-button').addEventListener('click', () => scanWithCamera().catch((err) => verdict(false, 'No camera', '', err.message)));
$('leave').addEventListener('click', () => {
  localStorage.removeItem(EVENT);
  event = null;
  $('scanner').classList.add('hidden');
  $('setup').classList.remove('hidden');
});
window.addEventListener('online', () => { showNetwork(); sync(); });
window.addEventListener('offline', showNetwork);
setInterval(sync, SYNC_EVERY_MS);
showNetwork();
signInForm(session, { form: document.createElement('form'), input: $('token'), hostedLink: $('hosted-ui'), onSignedIn() {} });
if ('serviceWorker' in navigator) navigator.serviceWorker.register('door-sw.js').catch(() => {});
if (event && session.token() && stored('keys', 'null')) startScanner();
else if (event) $('event').value = event;
