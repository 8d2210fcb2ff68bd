// The door's scanner: checks a ticket pass's Ed25519 signature here, offline, with the event's
// public keys (WebCrypto), shows the verdict full screen (colour, word, shape, sound, vibration)
// and records the check-in. Online, the check-in route decides (a second scan at any door is 409).
// Offline, the device keeps the check-in, refuses a second scan of the same pass here, and sends
// it with the time it happened when the network returns; a pass another door had checked in first
// comes back as a conflict, shown here and counted in the audit (docs/DESIGN.md section 11).
//
// Nothing let in here is dropped: a check-in the server has not answered for (no network, busy,
// or the staff token refused) stays on this device until it has, and the scanner asks for a
// sign-in when the token is what stops it. A keyboard-wedge scanner types into the pass field and
// presses Enter; the field is read and cleared at once, so the next scan can follow straight away.
//
// Kept in this device's localStorage, per event: the public keys (with when they were fetched),
// the event's figures last seen, and every pass let in here.

import { session as open, problem } from './sign-in.js';

const session = open(localStorage, 'door', { refresh: true });
const $ = (id) => document.getElementById(id);
const EVENT = 'ticket-grab.door.event';
// The door's name, as its staff set it up: sent with every check-in, so the organiser counts by door.
const DOOR_NAME = 'ticket-grab.door.name';
/** Check-ins waiting to be sent are tried this often. */
const SYNC_EVERY_MS = 5000;
/** The event's figures ("checked in x of N") are asked for this often while online. */
const SUMMARY_EVERY_MS = 15000;
/** Stored keys older than this are fetched again when online (offline, they are still used). */
const KEYS_FRESH_MS = 24 * 3600 * 1000;
/** A pass naming a key this device lacks fetches the keys again, at most this often (forged key ids). */
const UNKNOWN_KEY_REFETCH_MS = 10000;
/** The same pass read again within this, with no other pass between, repeats its verdict. */
const REPEAT_MS = 2000;
/** The camera sees a code "still in view" when it read it again within this. */
const IN_VIEW_MS = 1500;
/** How long a verdict stays on screen (a tap or the next scan dismisses it sooner). */
const SHOWN_MS = { admitted: 4000, already: 8000, refused: 8000, notice: 8000 };

let event = localStorage.getItem(EVENT);
let syncing = false;
/** Sending waits until then (the server said 429 or was busy). */
let syncAfter = 0;
/** The token the server refused (sending waits for another), and why. */
// The token each event's server refused (401, 403 FORBIDDEN): that event's check-ins wait for a
// sign-in; other events' still sync.
const refusedFor = new Map();
// A check-in asked for at a scan waits this long for the server; then the device decides alone
// (venue Wi-Fi can be connected and not answer): the verdict never waits on the network longer.
const VERDICT_DEADLINE_MS = 1000;
// After a scan's request missed its deadline, scans are checked on this device alone for this
// long (the sync, in the background, finds the network again): a burst is not 1 s a pass.
const OFFLINE_FOR_MS = 10000;
// What the background (the sync, the figures, a lookup) waits for a reply.
const REQUEST_TIMEOUT_MS = 5000;
// The sign-in's end is announced this long before (a token lasts an hour; a door's night, more).
const SIGN_IN_WARNING_MS = 15 * 60 * 1000;
/** Until then, scans do not ask the server (a request missed its deadline). */
let offlineUntil = 0;
let lastUnknownKeyFetch = 0;
/** The last pass read and its verdict, for a repeat read. */
let lastRead = null;
let hideTimer = null;
let cameraStream = null;
let wakeLock = null;
let audio = null;
let queue = Promise.resolve();

/** What the verdicts were, in order (the browser test reads it). */
window.doorVerdicts = [];
/** How often, and when last, the camera read a code. */
window.doorCamera = { reads: 0, lastReadAt: 0 };

const get = (ev, name, fallback) => JSON.parse(localStorage.getItem(`ticket-grab.door.${ev}.${name}`) || fallback);
const put = (ev, name, value) => localStorage.setItem(`ticket-grab.door.${ev}.${name}`, JSON.stringify(value));
const stored = (name, fallback) => get(event, name, fallback);
const store = (name, value) => put(event, name, value);
/** One scan written (read fresh, so a write made meanwhile is kept). */
function keepScan(ev, order, scan) {
  const scans = get(ev, 'scans', '{}');
  if (scan === null) delete scans[order];
  else scans[order] = scan;
  put(ev, 'scans', scans);
}
const checkInPath = (ev) => `/admin/events/${encodeURIComponent(ev)}/check-in`;

/**
 * The token `ev`'s check-ins are sent with: the door's own for the event it checks now; for an
 * event it checked before (its check-ins still waiting), the token it was checked with, or one
 * staff signed in with for it since.
 */
function tokenFor(ev) {
  if (ev === event) return session.token();
  // The token kept for it, while it lasts; then the door's own (a sign-in since, hosted or renewed).
  const own = get(ev, 'token', 'null');
  const ended = own && endsAt(own) !== null && Date.now() >= endsAt(own);
  return own && !ended && refusedFor.get(ev) !== own ? own : session.token();
}

/** When a token's sign-in ends (its `exp`, in ms), or null when it names no end. */
function endsAt(token) {
  try {
    const body = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    const exp = JSON.parse(atob(body)).exp;
    return Number.isFinite(exp) ? exp * 1000 : null;
  } catch {
    return null;
  }
}

/**
 * Whether `ev`'s server cannot be asked with this device's sign-in: none, ended (the token's own
 * end), or refused by that server. Then nothing this device has not itself seen let in is green.
 */
function signInLapsed(ev) {
  const token = tokenFor(ev);
  if (!token || refusedFor.get(ev) === token) return true;
  const ends = endsAt(token);
  return ends !== null && Date.now() >= ends;
}

/** How far the server's clock is from this device's (from the figures' `as_of`): an offline
 * check-in's time is sent in the server's time, so a device whose clock runs fast loses none. */
let clockSkewMs = 0;
const serverTime = () => new Date(Date.now() + clockSkewMs).toISOString();

/** Scans are decided here alone: the browser is offline, or a request just missed its deadline. */
const checkingOffline = () => !navigator.onLine || Date.now() < offlineUntil;
const when = (iso) => new Date(iso).toLocaleTimeString();
const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;

function bytes(base64url) {
  const b64 = base64url.replace(/-/g, '+').replace(/_/g, '/');
  return Uint8Array.from(atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4)), (c) => c.charCodeAt(0));
}

/**
 * The event's pass keys (the current one, the next while a rotation is staged, the previous):
 * fetched when the door is set up and kept on this device, so passes check offline; fetched again
 * when older than a day (while online) and when a pass names a key the device does not have.
 */
async function passKeys() {
  const ring = stored('keys', 'null');
  // A ring stored before keys carried their time (a bare list) counts as stale.
  const keys = Array.isArray(ring) ? ring : ring?.keys;
  const fetchedAt = Array.isArray(ring) ? 0 : ring?.fetched_at || 0;
  if (!keys) return fetchKeys();
  // Stale keys still check passes: fetched again in the background, never in a verdict's way (a
  // key rotated since shows as unknown, and that path fetches them within the deadline).
  if (Date.now() - fetchedAt > KEYS_FRESH_MS && !checkingOffline() && !refreshingKeys) {
    refreshingKeys = true;
    fetchKeys().catch(() => {}).finally(() => { refreshingKeys = false; });
  }
  return keys;
}
let refreshingKeys = false;

async function fetchKeys(ev = event, timeoutMs = REQUEST_TIMEOUT_MS) {
  const reply = await session.api(`/events/${encodeURIComponent(ev)}/pass-key`, { signal: AbortSignal.timeout(timeoutMs) });
  if (!reply.ok) throw new Error(await problem(reply));
  const ring = await reply.json();
  const keys = [{ id: ring.key_id, key: ring.public_key }];
  for (const other of [ring.next, ring.previous]) {
    if (other) keys.push({ id: other.key_id, key: other.public_key });
  }
  put(ev, 'keys', { fetched_at: Date.now(), keys });
  return keys;
}

function keysStale() {
  const ring = stored('keys', 'null');
  return !ring || Array.isArray(ring) || Date.now() - (ring.fetched_at || 0) > KEYS_FRESH_MS;
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
  // What an unverified pass claims (its event, order, number) is for the server to check.
  if (!candidates.length) {
    return { ...refused('signed with a key this door does not hold'), unknownKey: true, event: claims.e, order: claims.o, ticketNo: claims.n };
  }
  const message = new TextEncoder().encode((v1 ? 'ticket-pass-v1\n' : 'ticket-pass-v2\n') + payload);
  let checked = false;
  for (const k of candidates) {
    try {
      const key = await crypto.subtle.importKey('raw', bytes(k.key), { name: 'Ed25519' }, false, ['verify']);
      checked = true;
      if (await crypto.subtle.verify({ name: 'Ed25519' }, key, sig, message)) {
        return { ok: true, event: claims.e, order: claims.o, ticketNo: claims.n };
      }
    } catch {
      // a malformed stored key checks nothing; nor does a browser without Ed25519 (before
      // Chrome 137, Safari 17, Firefox 129)
    }
  }
  // Nothing could be checked here: not a forgery on this device's word, the server's to decide.
  if (!checked) return { ...refused('this device cannot check the signature'), unknownKey: true, event: claims.e, order: claims.o, ticketNo: claims.n };
  return refused('the signature does not match: a forged or altered pass');
}

// The verdict: full screen, a colour, a word and a shape each (a tick in a circle, a cross in a
// square, "!" in a diamond), a short tone and a vibration; announced by the "Last:" line.
const LOOK = {
  admitted: { glyph: '✓', tones: [[880, 0.12]], buzz: [90] },
  already: { glyph: '!', tones: [[520, 0.1], [520, 0.1]], buzz: [150, 80, 150] },
  refused: { glyph: '✕', tones: [[180, 0.45]], buzz: [300, 100, 300] },
  notice: { glyph: 'i', tones: [[440, 0.08]], buzz: [60] },
};

function wakeAudio() {
  try {
    audio ??= new AudioContext();
    if (audio.state === 'suspended') audio.resume().catch(() => {});
  } catch {
    audio = null; // no audio here: the verdict is still seen and felt
  }
}

function tone(tones) {
  if (!audio || audio.state !== 'running' || !$('sound').checked) return false;
  let t = audio.currentTime;
  for (const [frequency, seconds] of tones) {
    const osc = audio.createOscillator();
    const gain = audio.createGain();
    osc.type = 'square';
    osc.frequency.value = frequency;
    gain.gain.setValueAtTime(0.15, t);
    gain.gain.exponentialRampToValueAtTime(0.001, t + seconds);
    osc.connect(gain).connect(audio.destination);
    osc.start(t);
    osc.stop(t + seconds);
    t += seconds + 0.07;
  }
  return true;
}

/** Shows a verdict; `repeat`: the same pass read again, its verdict shown again as it was. */
function show(v, repeat = false) {
  const box = $('verdict');
  const detail = repeat ? [v.detail, 'the same pass read again'].filter(Boolean).join(' · ') : v.detail || '';
  box.className = `verdict-${v.result}`;
  box.dataset.result = v.result;
  $('verdict-glyph').textContent = LOOK[v.result].glyph;
  $('verdict-text').textContent = v.headline;
  $('verdict-ticket').textContent = v.ticketNo ? `Ticket ${v.ticketNo}` : '';
  $('verdict-detail').textContent = detail;
  $('last-verdict').textContent = [v.headline, v.ticketNo ? `ticket ${v.ticketNo}` : '', detail].filter(Boolean).join(', ');
  box.animate?.([{ opacity: 0.55 }, { opacity: 1 }], { duration: 160 });
  const sound = tone(LOOK[v.result].tones);
  const vibrated = typeof navigator.vibrate === 'function' ? navigator.vibrate(LOOK[v.result].buzz) : false;
  window.doorVerdicts.push({ ...v, detail, repeat, sound, vibrated, at: Date.now() });
  clearTimeout(hideTimer);
  hideTimer = setTimeout(dismiss, SHOWN_MS[v.result]);
  return v;
}

const verdict = (result, headline, ticketNo, detail) => show({ result, headline, ticketNo: ticketNo || null, detail: detail || '' });

function dismiss() {
  clearTimeout(hideTimer);
  $('verdict').classList.add('hidden');
}

function clearVerdict() {
  dismiss();
  $('verdict').className = 'hidden';
  delete $('verdict').dataset.result;
  $('last-verdict').textContent = 'nothing checked yet';
  lastRead = null;
}

/** Checks one read, after the reads before it (a scanner may send the next at once). */
function enqueue(text) {
  const run = queue.then(() => check(text));
  queue = run.catch((err) => verdict('notice', 'Not checked', '', err.message));
  return queue;
}

async function check(text) {
  text = text.trim();
  if (!text) return;
  // A scanner's double read, or the camera seeing the pass again: the same verdict, not a
  // contradiction. Another pass read between makes a later read of this one a new scan.
  if (lastRead && lastRead.text === text && Date.now() - lastRead.at < REPEAT_MS) {
    // Never a second green: a pass handed back over the barrier would let two in.
    const v = lastRead.verdict;
    if (v.result === 'admitted') {
      show({ ...v, result: 'already', headline: 'Just let in', detail: `let in ${Math.round((Date.now() - lastRead.at) / 100) / 10} s ago: one person` }, true);
    } else {
      show(v, true);
    }
    return;
  }
  const v = await decide(text);
  lastRead = v.result === 'notice' ? null : { text, verdict: v, at: Date.now() };
}

/** The staff token is what the server refused: 401, or 403 FORBIDDEN (not staff of this event). */
const tokenRefused = (status, code) => status === 401 || (status === 403 && code === 'FORBIDDEN');
/**
 * Worth sending again later: no network, busy, limited; or a 403 that is not the API's (no
 * problem code: a firewall's block of the venue's address, which lifts).
 */
const transient = (status, code) => status === 408 || status === 429 || status >= 500 || (status === 403 && !code);

/**
 * A check-in sent; the reply carries the token it was sent with (`usedToken`). `body.scan` names
 * the scan (sent again on a retry, so a reply lost on its way is no conflict); `body.door` is the
 * door's name when the scan was made (this door's by default).
 */
async function post(ev, body, timeoutMs = REQUEST_TIMEOUT_MS) {
  const token = tokenFor(ev);
  const door = body.door === undefined ? localStorage.getItem(DOOR_NAME) : body.door;
  body = { ...body, door: door || undefined };
  try {
    const reply = await fetch(checkInPath(ev), {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      cache: 'no-store',
      redirect: 'error',
      signal: AbortSignal.timeout(timeoutMs),
    });
    return Object.assign(reply, { usedToken: token });
  } catch {
    return null; // no network, or no answer in time
  }
}

const WAITING = {
  network: 'offline: kept on this device, sent when the network returns',
  server: 'the server is busy: kept on this device, sent shortly',
  'sign-in': 'kept on this device: sign in again to send it',
};

/** Amber: the device cannot say, and staff do not let the holder in on this scan. */
const cannotConfirm = (ticketNo, why) => verdict('notice', 'Cannot check', ticketNo, why);

async function decide(text) {
  let keys;
  try {
    keys = await passKeys();
  } catch (e) {
    return cannotConfirm('', `the event's keys could not be fetched: ${e.message}`);
  }
  let pass = await verify(text, keys);
  if (pass.unknownKey && !checkingOffline() && Date.now() - lastUnknownKeyFetch > UNKNOWN_KEY_REFETCH_MS) {
    // A key published since this device fetched its keys (a rotation): fetch them again.
    lastUnknownKeyFetch = Date.now();
    try {
      pass = await verify(text, await fetchKeys(event, VERDICT_DEADLINE_MS));
    } catch {
      // no network: the server decides below, or nobody can
    }
  }
  // The event this scan is for, whatever the page turns to while it is on its way.
  const ev = event;
  if (!pass.ok && !pass.unknownKey) return verdict('refused', 'Refused', '', pass.why);
  // What an unverified pass says is not shown as its ticket: anyone can write it.
  const ticketNo = pass.ok ? pass.ticketNo : '';
  if (pass.event !== ev) return verdict('refused', 'Refused', ticketNo, `a pass of another event (${pass.event})`);
  const mine = pass.ok && get(ev, 'scans', '{}')[pass.order];
  if (mine) return verdict('already', 'Already in', ticketNo, `let in at this door${mine.door ? ` (${mine.door})` : ''} at ${when(mine.at)}`);

  // A pass this device cannot verify is the server's to decide: never green here.
  const unverified = pass.unknownKey
    ? `${pass.why === 'this device cannot check the signature' ? pass.why : 'signed with a key this door does not hold'}, and the server cannot be asked: not checked. Let the holder in only once the network is back and the pass checks`
    : null;
  if (checkingOffline()) return unverified ? cannotConfirm('', unverified) : keptHere(ev, pass, text, 'network');
  if (signInLapsed(ev)) {
    // The server could be asked, but not with this sign-in: a pass another door took is not
    // told from one nobody did, so nothing is green until staff sign in again.
    askSignIn(ev);
    return cannotConfirm(ticketNo, "this door's sign-in has ended: sign in again to check passes with the server");
  }
  // The scan's own id and time: a retry of it (its reply lost) is the same check-in, no conflict.
  const scan = { id: crypto.randomUUID(), at: serverTime(), door: localStorage.getItem(DOOR_NAME) || null };
  const reply = await post(ev, { pass: text, scan: scan.id, door: scan.door }, VERDICT_DEADLINE_MS);
  const p = reply ? await reply.clone().json().catch(() => ({})) : {};
  if (reply === null || (reply.ok && !p.checked_in_at)) {
    // No answer in time (or one that is not the API's: a captive portal): this device checks
    // alone for a while; the request may still land, and its retry is the same scan.
    offlineUntil = Date.now() + OFFLINE_FOR_MS;
    showNetwork();
    return unverified ? cannotConfirm('', unverified) : keptHere(ev, pass, text, 'network', scan);
  }
  if (tokenRefused(reply.status, p.code)) {
    needSignIn(reply, p, ev);
    return cannotConfirm(ticketNo, 'the server refused this door\'s sign-in: sign in again to check passes');
  }
  if (transient(reply.status, p.code)) {
    syncAfter = Date.now() + (p.retry_after_ms || SYNC_EVERY_MS);
    return unverified ? cannotConfirm('', 'the server is busy and this door cannot check the pass: try again in a moment') : keptHere(ev, pass, text, 'server', scan);
  }
  if (reply.ok) {
    const order = p.order_id || pass.order;
    keepScan(ev, order, { ticketNo: p.ticket_no || pass.ticketNo, at: p.checked_in_at, synced: true, door: scan.door });
    if (pass.unknownKey) fetchKeys().catch(() => {}); // the key the server knew, for the next ones
    showDevice();
    return verdict('admitted', 'Let in', p.ticket_no || pass.ticketNo, '');
  }
  return refusal(reply, p, ticketNo);
}

/** A verified pass let in on this device's word alone: kept, and sent when the server can be asked. */
function keptHere(ev, pass, text, waiting, scan = null) {
  scan ??= { id: crypto.randomUUID(), at: serverTime(), door: localStorage.getItem(DOOR_NAME) || null };
  keepScan(ev, pass.order, { ticketNo: pass.ticketNo, pass: text, at: scan.at, scan: scan.id, door: scan.door, synced: false, waiting });
  showDevice();
  return verdict('admitted', 'Let in', pass.ticketNo, WAITING[waiting]);
}

/** The server's refusal of a check-in asked for now (a scan or a lookup's "Let in"). */
async function refusal(reply, p, ticketNo) {
  switch (p.code) {
    case 'ALREADY_CHECKED_IN':
      return verdict('already', 'Already in', ticketNo, `checked in ${p.door ? `at ${p.door} ` : ''}at ${when(p.checked_in_at)}`);
    case 'TICKET_CANCELLED':
      return verdict('refused', 'Cancelled', ticketNo, 'this ticket was cancelled');
    case 'BAD_PASS':
      return verdict('refused', 'Refused', ticketNo, 'the server does not know this pass: forged, altered, or of no ticket');
    case 'CHECK_IN_CLOSED':
      return verdict('refused', 'Not open', ticketNo, [p.title, p.detail].filter(Boolean).join(': '));
    default:
      return verdict('refused', 'Refused', ticketNo, [p.title, p.detail].filter(Boolean).join(': ') || `HTTP ${reply.status}`);
  }
}

/** What happened to a check-in made offline that the server did not take as it was. */
function conflict(status, p) {
  const detail = p.detail ? ` (${p.detail})` : '';
  switch (p.code) {
    case 'ALREADY_CHECKED_IN':
      return `let in twice: another door had checked this ticket in at ${when(p.checked_in_at)}; the server counts the conflict`;
    case 'TICKET_CANCELLED':
      return 'the ticket had been cancelled meanwhile; not recorded as a check-in';
    case 'CHECK_IN_CLOSED':
      return `check-in was closed at that time${detail}; not recorded`;
    case 'OFFLINE_TIME_REFUSED':
      return `the server refused the time it was let in${detail}; not recorded`;
    case 'BAD_PASS':
      return `the server refused the pass${detail}; not recorded`;
    case 'TICKET_NOT_FOUND':
      return `the server has no such ticket${detail}; not recorded`;
    default:
      return `${p.title || `HTTP ${status}`}${detail}; not recorded`;
  }
}

/** Every event this device holds check-ins for that wait to be sent. */
function eventsWaiting() {
  const found = [];
  for (let i = 0; i < localStorage.length; i++) {
    const m = /^ticket-grab\.door\.(.+)\.scans$/.exec(localStorage.key(i));
    if (m && Object.values(get(m[1], 'scans', '{}')).some((s) => !s.synced)) found.push(m[1]);
  }
  return found;
}

function markWaiting(ev, waiting) {
  const scans = get(ev, 'scans', '{}');
  for (const s of Object.values(scans)) if (!s.synced) s.waiting = waiting;
  put(ev, 'scans', scans);
}

/**
 * Sends the check-ins made offline, oldest first, for every event this device holds some for;
 * stops at the first that cannot be sent yet. Only a settled answer takes one off the list.
 */
async function sync() {
  if (syncing || Date.now() < syncAfter) return;
  syncing = true;
  let again = false;
  try {
    outer: for (const ev of eventsWaiting()) {
      // This event's server refused this very token: its check-ins wait for a sign-in, and the
      // other events' go on.
      if (!tokenFor(ev) || refusedFor.get(ev) === tokenFor(ev)) continue;
      const pending = Object.entries(get(ev, 'scans', '{}')).filter(([, s]) => !s.synced).sort((a, b) => (a[1].at < b[1].at ? -1 : 1));
      for (const [order, scan] of pending) {
        // The scan's own door name (null: none), not the one this device has now.
        const reply = await post(ev, { pass: scan.pass, admitted_offline_at: scan.at, scan: scan.scan, door: scan.door ?? null });
        if (reply === null) {
          markWaiting(ev, 'network');
          break outer;
        }
        // The server answers: scans ask it again (the check-in it answers for is decided there).
        offlineUntil = 0;
        const p = await reply.json().catch(() => ({}));
        if (tokenRefused(reply.status, p.code)) {
          // (A sign-in made while this was on its way: sent again with it, at once.)
          if (needSignIn(reply, p, ev)) markWaiting(ev, 'sign-in');
          else again = true;
          continue outer;
        }
        // A 2xx that is not the API's record of it (a captive portal, a proxy), or a refusal
        // that is not the API's (no code: a gateway's, a proxy's): not settled.
        if (transient(reply.status, p.code) || (reply.ok && !p.checked_in_at) || (!reply.ok && !p.code)) {
          markWaiting(ev, 'server');
          syncAfter = Date.now() + (p.retry_after_ms || SYNC_EVERY_MS);
          break outer;
        }
        const done = { ...get(ev, 'scans', '{}')[order], synced: true };
        delete done.pass;
        delete done.waiting;
        // The server has this very check-in (a reply lost before): no conflict.
        const same = p.code === 'ALREADY_CHECKED_IN' && Date.parse(p.checked_in_at) === Date.parse(scan.at);
        if (!reply.ok && !same) done.conflict = conflict(reply.status, p);
        keepScan(ev, order, done);
      }
      // Every check-in of an event the door left is sent: the token kept for them goes.
      if (ev !== event) localStorage.removeItem(`ticket-grab.door.${ev}.token`);
    }
  } finally {
    syncing = false;
    if (event) showDevice();
    if (again) setTimeout(sync, 0);
  }
}

/**
 * The server refused the token `reply` was sent with: keep scanning, keep every check-in, and
 * offer a sign-in here. False when another token was signed in meanwhile (that one is not refused).
 */
function needSignIn(reply, p, ev = event) {
  if (reply.usedToken !== tokenFor(ev)) return false;
  const status = reply.status;
  refusedFor.set(ev, tokenFor(ev));
  const why = status === 401
    ? 'The server refused this door\'s sign-in (expired, or not from this deployment).'
    : `This sign-in is not staff of ${ev}${p?.detail ? ` (${p.detail})` : ''}.`;
  askSignIn(ev, why);
  return true;
}

/**
 * Shows the sign-in card: why (the server refused the sign-in, or it ended), and what waits. The
 * check-ins kept here stay; until staff sign in, a pass this device has not let in is amber.
 */
function askSignIn(ev, why = null) {
  why ??= `This door's sign-in ${ev === event ? '' : `for ${ev} `}ended at ${when(new Date(endsAt(tokenFor(ev)) || Date.now()).toISOString())}.`;
  const forOther = ev !== event ? ` Check-ins made for ${ev} wait on this device: a token of its staff sends them.` : '';
  $('sign-in-why').textContent = `${why} Until then passes show amber (this door cannot tell one let in at another door); check-ins kept here are kept.${forOther}`;
  $('sign-in').classList.remove('hidden');
  if (event) showDevice();
}

function signedIn() {
  refusedFor.clear();
  $('sign-in').classList.add('hidden');
  $('sign-in-why').textContent = '';
  watchSignIn();
  for (const ev of eventsWaiting()) markWaiting(ev, 'network');
  showDevice();
  sync();
  refreshSummary();
  if (event && keysStale()) fetchKeys().catch(() => {});
}

/** Asks for the event's figures (and, with `query`, a holder) with `token` (the stored one by default). */
async function summary(ev, query = '', token = session.token()) {
  const reply = await fetch(checkInPath(ev) + query, {
    headers: { authorization: `Bearer ${token}` },
    cache: 'no-store',
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  return Object.assign(reply, { usedToken: token });
}

function showSummary(s) {
  if (!s) return;
  $('event-title').textContent = s.title || s.event_id;
  const at = (iso) => new Date(iso).toLocaleString([], { weekday: 'short', day: 'numeric', month: 'short', year: 'numeric', hour: '2-digit', minute: '2-digit' });
  const parts = [];
  if (s.starts_at) parts.push(at(s.starts_at));
  if (s.venue) parts.push(s.venue);
  if (s.check_in_from) parts.push(`doors from ${at(s.check_in_from)}`);
  $('event-when').textContent = parts.join(' · ');
  // The figures were counted at `as_of`: this device's check-ins since are added, so the door's
  // own total moves with each scan rather than every 15 s.
  const door = localStorage.getItem(DOOR_NAME);
  const since = s.as_of ? Date.parse(s.as_of) : Infinity;
  const mineSince = Object.values(stored('scans', '{}')).filter((x) => Date.parse(x.at) > since).length;
  $('event-checked-in').textContent = Number.isInteger(s.checked_in) ? s.checked_in + mineSince : '–';
  $('event-tickets').textContent = s.tickets ?? '–';
  $('counts-as-of').textContent = s.as_of ? `as of ${when(s.as_of)}${mineSince ? `, and ${mineSince} here since` : ''}` : '';
  const atDoor = door && s.by_door ? (s.by_door[door] || 0) + mineSince : null;
  $('door-total').textContent = door ? ` · ${door}: ${atDoor ?? '–'} on all its devices` : '';
}

async function refreshSummary() {
  if (!event || !session.token() || $('scanner').classList.contains('hidden')) return;
  const ev = event;
  let reply;
  try {
    reply = await summary(ev);
  } catch {
    return; // offline: the figures last seen stay
  }
  const p = reply.ok ? await reply.json() : await reply.json().catch(() => ({}));
  if (reply.ok && refusedFor.get(ev) === reply.usedToken) {
    // This event's server takes this token again (a refusal that was not the token's): go on.
    refusedFor.delete(ev);
    sync();
  }
  if (ev !== event) return;
  if (reply.ok) {
    // The server answers: scans ask it again, and its clock is known.
    offlineUntil = 0;
    const said = Date.parse(reply.headers.get('date') || '');
    if (Number.isFinite(said)) clockSkewMs = said + 500 - Date.now(); // a whole second: its middle
    store('summary', p);
    showSummary(p);
  } else if (tokenRefused(reply.status, p.code)) {
    needSignIn(reply, p, ev);
  }
}

function showDevice() {
  showSummary(stored('summary', 'null'));
  const scans = Object.values(stored('scans', '{}'));
  const pending = scans.filter((s) => !s.synced).sort((a, b) => (a.at < b.at ? -1 : 1));
  $('pending-count').textContent = pending.length;
  const signIn = pending.some((s) => s.waiting === 'sign-in');
  const busy = pending.some((s) => s.waiting === 'server');
  $('pending-state').textContent = !pending.length ? '' : signIn ? ': waiting for sign-in' : busy ? ': the server is busy, retrying' : ': waiting for the network';
  $('pending-table').classList.toggle('hidden', !pending.length);
  const waitingFor = { 'sign-in': 'sign-in', server: 'the server (busy)', network: 'the network' };
  $('pending').replaceChildren(...pending.map((s) => row([s.ticketNo, when(s.at), waitingFor[s.waiting] || 'the network'])));
  $('scanned-count').textContent = scans.length;
  const conflicts = scans.filter((s) => s.conflict);
  $('conflict-alert').classList.toggle('hidden', !conflicts.length);
  $('conflict-alert').textContent = conflicts.length
    ? `${plural(conflicts.length, 'pass', 'passes')} let in here offline ${conflicts.length === 1 ? 'needs' : 'need'} attention: see Conflicts below.`
    : '';
  $('conflicts').replaceChildren(...conflicts.map((s) => row([s.ticketNo, when(s.at), s.conflict])));
  $('conflicts-table').classList.toggle('hidden', !conflicts.length);
  $('no-conflicts').classList.toggle('hidden', conflicts.length > 0);
}

function row(cells) {
  const tr = document.createElement('tr');
  for (const cell of cells) tr.append(Object.assign(document.createElement('td'), { textContent: cell }));
  return tr;
}

function showNetwork() {
  $('network').textContent = !navigator.onLine
    ? 'Offline: passes are checked here and sent later'
    : checkingOffline()
      ? 'The network does not answer: passes are checked here and sent later'
      : 'Online';
  // Back to asking the server once the deadline's pause is over.
  if (checkingOffline() && navigator.onLine) setTimeout(showNetwork, Math.max(0, offlineUntil - Date.now()) + 50);
}

/** Keeps the screen on while the scanner is open (re-acquired when the page is shown again). */
async function holdScreen() {
  if (wakeLock || $('scanner').classList.contains('hidden') || document.visibilityState !== 'visible') return;
  if (!('wakeLock' in navigator)) {
    $('wake-lock').textContent = 'This browser cannot keep the screen on: set the screen timeout in the device\'s settings.';
    return;
  }
  try {
    wakeLock = await navigator.wakeLock.request('screen');
    wakeLock.addEventListener('release', () => { wakeLock = null; });
    $('wake-lock').textContent = 'The screen stays on while the scanner is open.';
  } catch (err) {
    $('wake-lock').textContent = `The screen may go dark: ${err.message}`;
  }
}

function releaseScreen() {
  wakeLock?.release().catch(() => {});
  wakeLock = null;
}

/** The camera: the browser's BarcodeDetector where it has one, else jsQR on each frame. */
async function startCamera() {
  if (cameraStream) return;
  const video = $('camera');
  const stream = await navigator.mediaDevices.getUserMedia({ video: { facingMode: 'environment' } });
  cameraStream = stream;
  video.srcObject = stream;
  $('camera-box').classList.remove('hidden');
  $('camera-button').classList.add('hidden');
  await video.play();
  // A dark doorway: the phone's light, where its camera has one.
  const [track] = stream.getVideoTracks();
  $('torch').classList.toggle('hidden', !track?.getCapabilities?.().torch);
  // The browser's own detector where it reads QR codes (not every platform's does), else jsQR.
  const native = 'BarcodeDetector' in window && (await window.BarcodeDetector.getSupportedFormats()).includes('qr_code');
  const detector = native ? new window.BarcodeDetector({ formats: ['qr_code'] }) : null;
  const canvas = document.createElement('canvas');
  const context = canvas.getContext('2d', { willReadFrequently: true });
  let last = '';
  let lastSeen = 0;
  const frame = async () => {
    if (video.srcObject !== stream) return;
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
    if (text) {
      window.doorCamera.reads += 1;
      window.doorCamera.lastReadAt = Date.now();
      // A code still in front of the camera is one scan, however long it stays there.
      const stillInView = text === last && Date.now() - lastSeen < IN_VIEW_MS;
      last = text;
      lastSeen = Date.now();
      if (!stillInView) {
        await enqueue(text);
        lastSeen = Date.now();
      }
    }
    requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
}

function stopCamera() {
  const video = $('camera');
  cameraStream?.getTracks().forEach((t) => t.stop());
  cameraStream = null;
  video.srcObject = null;
  $('camera-box').classList.add('hidden');
  $('camera-button').classList.remove('hidden');
  $('torch').classList.add('hidden');
  $('torch').setAttribute('aria-pressed', 'false');
}

async function toggleTorch() {
  const [track] = cameraStream?.getVideoTracks() || [];
  if (!track) return;
  const on = $('torch').getAttribute('aria-pressed') !== 'true';
  try {
    await track.applyConstraints({ advanced: [{ torch: on }] });
    $('torch').setAttribute('aria-pressed', String(on));
  } catch {
    $('torch').classList.add('hidden');
  }
}

// Looking a holder up (a phone that died): by ticket number, or by order id.
let holder = null;

async function lookUp(query) {
  $('lookup-result').classList.add('hidden');
  holder = null;
  const ev = event;
  const param = /^\d+$/.test(query) ? `?ticket=${query}` : `?order=${encodeURIComponent(query)}`;
  let reply;
  try {
    reply = await summary(ev, param);
  } catch {
    $('lookup-status').textContent = 'A lookup needs the network.';
    return;
  }
  const p = await reply.json().catch(() => ({}));
  if (ev !== event) return;
  if (!reply.ok) {
    if (tokenRefused(reply.status, p.code)) needSignIn(reply, p, ev);
    $('lookup-status').textContent = p.code === 'TICKET_NOT_FOUND'
      ? `No ticket or order "${query}" at this event.`
      : `The lookup failed: ${[p.title, p.detail].filter(Boolean).join(': ') || `HTTP ${reply.status}`}`;
    return;
  }
  store('summary', p);
  showSummary(p);
  holder = { ...p.holder, event: ev };
  const here = stored('scans', '{}')[holder.order_id];
  const status = { CONFIRMED: 'Confirmed', CANCELLED: 'Cancelled', REJECTED: 'Rejected' }[holder.status] || holder.status;
  $('holder-ticket').textContent = `${holder.ticket_no} (order ${holder.order_id})`;
  $('holder-status').textContent = status;
  $('holder-checked-in').textContent = holder.checked_in_at
    ? `yes, at ${when(holder.checked_in_at)}`
    : here && !here.synced ? `let in at this door at ${when(here.at)} (offline, not sent yet)` : 'not yet';
  $('holder-email').textContent = holder.email || '';
  const canLetIn = holder.status === 'CONFIRMED' && !holder.checked_in_at && !here;
  $('let-in').classList.toggle('hidden', !canLetIn);
  $('let-in').textContent = `Let in ticket ${holder.ticket_no}…`;
  $('let-in-confirm').classList.add('hidden');
  $('lookup-status').textContent = `Ticket ${holder.ticket_no}: ${status.toLowerCase()}${holder.checked_in_at ? ', already checked in' : ''}.`;
  $('lookup-result').classList.remove('hidden');
}

/**
 * A let-in by number asks staff first who the holder is: the masked e-mail address and the order,
 * to compare with the person at the door (anyone can say a number). The server lets in only that
 * order: a ticket passed to someone else since is refused.
 */
function askLetIn() {
  if (!holder) return;
  $('let-in-ask').textContent = `Ticket ${holder.ticket_no} is held by ${holder.email || 'an address not shown'}, order ${holder.order_id}. Ask the person for their e-mail address (or the order in their mail): only if it is theirs, let them in.`;
  $('let-in-yes').textContent = `Yes, theirs: let in ticket ${holder.ticket_no}`;
  $('let-in').classList.add('hidden');
  $('let-in-confirm').classList.remove('hidden');
  $('let-in-no').focus();
}

async function letInByNumber(confirmed) {
  if (!confirmed) return;
  $('let-in-confirm').classList.add('hidden');
  const { ticket_no: ticketNo, order_id: order, event: ev } = confirmed;
  const reply = await post(ev, { ticket_no: ticketNo, order_id: order });
  if (reply === null) return verdict('notice', 'Not let in', ticketNo, 'a check-in by ticket number needs the network');
  const p = await reply.json().catch(() => ({}));
  if (reply.ok && p.checked_in_at) {
    keepScan(ev, p.order_id || order, { ticketNo, at: p.checked_in_at, synced: true, manual: true });
    $('lookup-result').classList.add('hidden');
    $('lookup-status').textContent = `Ticket ${ticketNo} let in by number.`;
    holder = null;
    showDevice();
    return verdict('admitted', 'Let in', ticketNo, 'by ticket number, after a lookup');
  }
  if (tokenRefused(reply.status, p.code)) {
    needSignIn(reply, p, ev);
    return verdict('notice', 'Sign in again', ticketNo, 'the server refused this door\'s sign-in');
  }
  if (reply.ok || transient(reply.status, p.code)) return verdict('notice', 'Not let in', ticketNo, 'the server is busy: try again in a moment');
  return refusal(reply, p, ticketNo);
}

function startScanner() {
  $('setup').classList.add('hidden');
  $('scanner').classList.remove('hidden');
  showSummary(stored('summary', 'null') || { title: event });
  showDevice();
  holdScreen();
  sync();
  refreshSummary();
  watchSignIn();
  $('pass').focus();
}

$('setup-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  wakeAudio();
  const say = (text) => ($('setup-status').textContent = text);
  const candidate = $('event').value.trim();
  const doorName = $('door-name').value.trim();
  if (doorName && !/^[A-Za-z0-9 ._/#-]{1,40}$/.test(doorName)) {
    return say("A door's name is up to 40 letters, digits, spaces and . _ / # -");
  }
  const token = $('token').value.trim() || session.token();
  if (!token) return say('A staff token is needed.');
  say('Checking the sign-in…');
  let reply;
  try {
    reply = await summary(candidate, '', token);
  } catch {
    return say('Setting up a door needs the network (once): the scanner then works without it.');
  }
  const p = await reply.json().catch(() => ({}));
  if (!reply.ok) {
    if (reply.status === 401) return say('The server refused this token (expired, or not from this deployment): sign in again.');
    if (reply.status === 403) {
      return say(`Refused: this token is not staff of ${candidate}. A door needs a token of the staff, staff-${candidate} or admin group.`);
    }
    if (p.code === 'EVENT_NOT_FOUND') return say(`There is no event ${candidate}.`);
    return say(`The door could not be set up: ${[p.title, p.detail].filter(Boolean).join(': ') || `HTTP ${reply.status}`}`);
  }
  session.set(token);
  $('token').value = '';
  event = candidate;
  localStorage.setItem(EVENT, event);
  if (doorName) localStorage.setItem(DOOR_NAME, doorName);
  else localStorage.removeItem(DOOR_NAME);
  store('summary', p);
  try {
    await fetchKeys();
  } catch (err) {
    return say(`The event's public keys could not be fetched: ${err.message}`);
  }
  refusedFor.delete(event);
  // Pending check-ins live in this device's storage: ask the browser not to evict it.
  navigator.storage?.persist?.().catch(() => {});
  say('');
  startScanner();
});

// A keyboard-wedge scanner types wherever the focus is (on a button just pressed, on the page):
// its keys go to the pass field unless staff are typing in another field.
document.addEventListener('keydown', (e) => {
  if ($('scanner').classList.contains('hidden') || e.ctrlKey || e.metaKey || e.altKey || e.key.length !== 1) return;
  // Fields staff type in keep their keys; a checkbox or a button just pressed does not.
  const t = e.target;
  const typing = t instanceof HTMLTextAreaElement || t instanceof HTMLSelectElement
    || (t instanceof HTMLInputElement && !['checkbox', 'radio', 'button', 'submit', 'reset'].includes(t.type));
  if (typing) return;
  e.preventDefault();
  $('pass').focus();
  // The key that moved the focus is the pass's first character: not lost on the way.
  $('pass').value += e.key;
});

/** When each scan was entered (the browser test measures each verdict's wait from it). */
window.doorScans = [];

$('pass-form').addEventListener('submit', (e) => {
  e.preventDefault();
  window.doorScans.push({ at: Date.now() });
  // Read and cleared at once: a scanner's next pass may be typed while this one is checked.
  const text = $('pass').value;
  $('pass').value = '';
  $('pass').focus();
  enqueue(text);
});

$('sign-in-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const token = $('sign-in-token').value.trim();
  if (!token) return;
  const say = (text) => ($('sign-in-status').textContent = text);
  // A pass scanned while this field had the focus is a scan, not a token.
  if (/^TP[12]\./.test(token)) {
    $('sign-in-token').value = '';
    $('pass').focus();
    enqueue(token);
    return;
  }
  // The token is tried for this event and for each event whose check-ins wait on this device (a
  // door switched events with some unsent): each event it is staff of takes it.
  const others = eventsWaiting().filter((ev) => ev !== event);
  const asked = [];
  for (const ev of [event, ...others]) {
    let reply = null;
    try {
      reply = await summary(ev, '', token);
    } catch {
      // offline: taken as it is, tried when the network returns
    }
    asked.push({ ev, refused: reply ? reply.status === 401 || reply.status === 403 : false, expired: reply?.status === 401 });
  }
  const taken = asked.filter((a) => !a.refused);
  if (!taken.length) {
    return say(asked[0].expired
      ? 'That token was refused too (expired, or not from this deployment).'
      : `That token is not staff of ${[event, ...others].join(' or ')}: it needs the staff, staff-<event> or admin group.`);
  }
  for (const { ev } of taken) {
    if (ev === event) session.set(token);
    else put(ev, 'token', token);
  }
  $('sign-in-token').value = '';
  const names = taken.map((a) => a.ev);
  say(`Signed in for ${names.join(', ')}: sending what waited.`);
  signedIn();
  $('pass').focus();
});

/**
 * The sign-in's end, seen coming: renewed without staff where the user pool gave a refresh token;
 * else announced from SIGN_IN_WARNING_MS before, and once ended, the sign-in card (amber verdicts
 * meanwhile: see `decide`).
 */
let renewing = false;
async function watchSignIn() {
  if (!event || $('scanner').classList.contains('hidden')) return;
  const ends = endsAt(session.token());
  const left = ends === null ? Infinity : ends - Date.now();
  if (left < SIGN_IN_WARNING_MS && session.renewable() && !renewing && navigator.onLine) {
    renewing = true;
    const renewed = await session.renew().finally(() => { renewing = false; });
    if (renewed) {
      $('sign-in-ends').classList.add('hidden');
      return signedIn();
    }
  }
  const note = $('sign-in-ends');
  if (left <= 0) {
    note.textContent = 'This door\'s sign-in has ended: sign in again. Passes show amber until then.';
    note.classList.remove('hidden');
    if ($('sign-in').classList.contains('hidden')) askSignIn(event);
  } else if (left < SIGN_IN_WARNING_MS) {
    const at = new Date(ends).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
    note.textContent = `This door's sign-in ends at ${at} (in ${Math.max(1, Math.round(left / 60000))} min): sign in again before then (below), nothing kept here is lost.`;
    note.classList.remove('hidden');
    $('sign-in-why').textContent = `The sign-in ends at ${at}: a new one now keeps this door checking passes with the server.`;
    $('sign-in').classList.remove('hidden');
  } else {
    note.classList.add('hidden');
  }
}

$('camera-button').addEventListener('click', () => {
  wakeAudio();
  startCamera().catch((err) => {
    stopCamera();
    verdict('notice', 'No camera', '', err.message);
  });
});
$('camera-stop').addEventListener('click', stopCamera);
$('torch').addEventListener('click', toggleTorch);
$('sound').checked = localStorage.getItem('ticket-grab.door.sound') !== 'off';
$('sound').addEventListener('change', () => {
  localStorage.setItem('ticket-grab.door.sound', $('sound').checked ? 'on' : 'off');
  $('pass').focus(); // the scanner's next pass goes to the field, not to the checkbox
});
$('verdict').addEventListener('click', () => {
  dismiss();
  if (!$('scanner').classList.contains('hidden')) $('pass').focus();
});
document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape') dismiss();
});
// A sound needs a gesture first (the browsers' autoplay rule): any tap or key wakes it.
document.addEventListener('pointerdown', wakeAudio, { capture: true });
document.addEventListener('keydown', wakeAudio, { capture: true });

$('lookup-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const query = $('lookup').value.trim();
  $('lookup').value = /^TP[12]\./.test(query) ? '' : query;
  // A pass scanned while the lookup field had the focus is a scan, not a lookup.
  if (/^TP[12]\./.test(query)) {
    $('pass').focus();
    enqueue(query);
  } else if (query) {
    lookUp(query);
  }
});
$('let-in').addEventListener('click', askLetIn);
$('let-in-yes').addEventListener('click', () => {
  // The holder staff confirmed, not whoever is looked up by the time the queue gets to it.
  const confirmed = holder;
  $('let-in-yes').disabled = true;
  queue = queue.then(() => letInByNumber(confirmed)).catch(() => {}).finally(() => { $('let-in-yes').disabled = false; });
});
$('let-in-no').addEventListener('click', () => {
  $('let-in-confirm').classList.add('hidden');
  $('lookup-status').textContent = `Ticket ${holder?.ticket_no ?? ''} not let in: the holder did not match.`;
  holder = null;
  $('lookup-result').classList.add('hidden');
  $('pass').focus();
});

$('leave').addEventListener('click', () => {
  // Check-ins of this event still to send keep the sign-in they were made under: the next
  // event's token is another event's staff's.
  if (event && eventsWaiting().includes(event) && session.token()) put(event, 'token', session.token());
  stopCamera();
  releaseScreen();
  clearVerdict();
  localStorage.removeItem(EVENT);
  event = null;
  holder = null;
  $('lookup-result').classList.add('hidden');
  $('lookup-status').textContent = '';
  $('lookup').value = '';
  $('sign-in').classList.add('hidden');
  $('scanner').classList.add('hidden');
  $('setup').classList.remove('hidden');
  const waiting = eventsWaiting();
  $('setup-status').textContent = waiting.length
    ? `Check-ins made offline still wait to be sent for ${waiting.join(', ')}: this device keeps sending them.`
    : '';
});

window.addEventListener('online', () => {
  showNetwork();
  // Reopened offline, the page could not read how to sign in here: it can now.
  if ($('sign-in-hosted').classList.contains('hidden')) showHostedLinks();
  syncAfter = 0;
  sync();
  refreshSummary();
  if (event && keysStale()) fetchKeys().catch(() => {});
});
window.addEventListener('offline', showNetwork);
document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible') holdScreen();
});
setInterval(() => {
  sync();
  if (event && navigator.onLine && keysStale() && !$('scanner').classList.contains('hidden')) fetchKeys().catch(() => {});
}, SYNC_EVERY_MS);
setInterval(refreshSummary, SUMMARY_EVERY_MS);
setInterval(watchSignIn, 15000);
showNetwork();
// The deployment's hosted sign-in, when it has one: at setup, and on the scanner when a sign-in
// is needed (the check-ins wait on this device meanwhile; the page comes back to the scanner).
function showHostedLinks() {
  session.hostedUi().then((url) => {
    if (!url) return;
    for (const link of [$('hosted-ui'), $('sign-in-hosted')]) {
      link.href = url;
      link.classList.remove('hidden');
    }
  });
}
showHostedLinks();
if ('serviceWorker' in navigator) navigator.serviceWorker.register('door-sw.js').catch(() => {});
session.ready().then(() => {
  if (event && session.token() && stored('keys', 'null')) startScanner();
  else if (event) $('event').value = event;
  // Back from the hosted sign-in with a reply this tab did not ask for (or an error): say so.
  const hostedRefusal = session.refused?.();
  if (hostedRefusal && $('scanner').classList.contains('hidden')) $('setup-status').textContent = hostedRefusal;
  else if (hostedRefusal) {
    $('sign-in').classList.remove('hidden');
    $('sign-in-status').textContent = hostedRefusal;
  } else if (!$('scanner').classList.contains('hidden')) {
    // Back from a sign-in at the scanner: what waited for it is sent.
    signedIn();
  }
});
