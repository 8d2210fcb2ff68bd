// The organiser's live page: polls GET /admin/events/{id}/live every second and draws the sale:
// the figures, the stock curve, grabs per second by outcome, the queue's depth, and the audit's
// checks. The queue's curves are the samples this page has seen, the stock's too (walked back by
// the tallied grants before the first); the rates come from the tallies the server kept (the last
// five minutes, whenever the page opened).

import { session as open, problem, signInForm } from './sign-in.js';

const session = open(sessionStorage, 'organiser');
const $ = (id) => document.getElementById(id);
const POLL_MS = 1000;
const WINDOW_S = 300;

let eventId = new URLSearchParams(location.hash.slice(1)).get('event');
let samples = []; // {t, remaining, inFlight, waiting}
let timer = null;
let following = !eventId;

function show(signedIn) {
  $('sign-in').classList.toggle('hidden', signedIn);
  $('live').classList.toggle('hidden', !signedIn);
  const claims = session.claims();
  $('who').textContent = signedIn && claims ? `Signed in as ${claims.sub}` : '';
}

function say(text, error = false) {
  $('status').textContent = text;
  $('status').classList.toggle('error', error);
}

async function loadEvents() {
  const reply = await session.api('/events?limit=100');
  if (reply.status === 401) return signOut('Your token was refused: sign in again.');
  if (!reply.ok) return say(`The event list: ${await problem(reply)}`, true);
  const { events } = await reply.json();
  events.sort((a, b) => (a.sale_start < b.sale_start ? 1 : -1));
  const select = $('event');
  select.replaceChildren(...events.map((e) => new Option(`${e.title} (${e.id})`, e.id)));
  if (following && events.length) choose(events[0].id);
  if (eventId && !events.some((e) => e.id === eventId)) select.add(new Option(eventId, eventId));
  if (eventId) select.value = eventId;
}

function choose(id) {
  if (id === eventId) return;
  eventId = id;
  samples = [];
  history.replaceState(null, '', `#event=${encodeURIComponent(id)}`);
}

async function poll() {
  if (!eventId) {
    say('No event yet: release one, and it shows here.');
    return;
  }
  const reply = await session.api(`/admin/events/${encodeURIComponent(eventId)}/live`);
  if (reply.status === 401) return signOut('Your token was refused: sign in again.');
  if (reply.status === 403) return say('This page needs a token of the admin group.', true);
  if (!reply.ok) return say(`The live view: ${await problem(reply)}`, true);
  const view = await reply.json();
  render(view);
}

function set(id, value) {
  $(id).textContent = value === null || value === undefined ? '–' : String(value);
}

function render(view) {
  const now = Date.parse(view.at) / 1000;
  if (view.remaining !== null) samples.push({ t: now, remaining: view.remaining, inFlight: view.in_flight, waiting: view.waiting });
  samples = samples.filter((s) => s.t > now - WINDOW_S);
  $('event-title').textContent = `${view.title} · ${view.capacity} tickets`;
  set('remaining', view.remaining);
  set('sold', view.remaining === null ? null : view.capacity - view.remaining);
  set('in-flight', view.in_flight);
  set('waiting', view.waiting);
  const a = view.audit;
  set('confirmed', a.confirmed);
  set('mails-sent', a.mails_sent);
  set('checked-in', a.checked_in);
  set('cancelled', a.cancelled);
  set('conflicts', a.check_in_conflicts);
  const last = view.grabs.per_second.filter((s) => s.second >= view.grabs.until - 2 && s.second < view.grabs.until);
  const rate = last.reduce((sum, s) => sum + Object.values(s.outcomes).reduce((x, y) => x + y, 0), 0) / 2;
  set('rate', Math.round(rate));
  $('audit-state').textContent = a.passed ? 'every check passed' : 'a check failed';
  $('audit-state').className = a.passed ? 'pass' : 'fail';
  $('audit-as-of').textContent = new Date(a.as_of).toLocaleTimeString();
  $('audit-as-of').dateTime = a.as_of;
  $('checks').replaceChildren(...a.checks.map((c) => {
    const li = document.createElement('li');
    li.className = c.passed ? 'pass' : 'fail';
    li.dataset.check = c.name;
    li.dataset.passed = String(c.passed);
    const badge = document.createElement('span');
    badge.className = 'badge';
    badge.textContent = c.passed ? 'pass' : 'fail';
    li.append(badge, `${c.name.replace(/_/g, ' ')}: ${c.detail}`);
    return li;
  }));
  const at = new Date(view.at).toLocaleTimeString();
  say(view.cache === 'live' ? `Live at ${at}` : `The cache cannot be read now; the audit still answers (${at}).`, view.cache !== 'live');

  // The charts span the sale seen so far (at least a minute, at most the window).
  const counted = view.grabs.per_second.map((s) => s.second);
  const first = Math.min(samples.length ? samples[0].t : now, counted.length ? counted[0] : now);
  const from = Math.max(now - WINDOW_S, Math.min(first - 5, now - 60));
  chart($('stock-chart'), [{ cls: 's0', points: stockCurve(view, from) }], from, now, view.capacity);
  const outcomes = [...new Set(view.grabs.per_second.flatMap((s) => Object.keys(s.outcomes)))].sort();
  const series = outcomes.map((o, i) => ({
    cls: `s${i % 7}`,
    name: o,
    points: perSecond(view.grabs, Math.floor(from), (s) => s.outcomes[o] || 0),
  }));
  chart($('rates-chart'), series, from, now);
  $('rates-legend').replaceChildren(...series.map((s) => {
    const li = document.createElement('li');
    li.className = s.cls;
    li.textContent = s.name;
    return li;
  }));
  chart($('queue-chart'), [
    { cls: 's0', points: samples.map((s) => [s.t, s.inFlight]) },
    { cls: 's3', points: samples.map((s) => [s.t, s.waiting]) },
  ], from, now);
}

/**
 * The stock over the window: the samples this page has seen, and before the first of them the
 * stock it had, walked back by the grants tallied each second (a page opened mid-sale still draws
 * the sale's start; numbers given back meanwhile are not in the tallies, so that part is close,
 * not exact).
 */
function stockCurve(view, from) {
  if (!samples.length) return [];
  const granted = new Map(view.grabs.per_second.map((s) => [s.second, s.outcomes.OK || 0]));
  const before = [];
  let stock = samples[0].remaining;
  for (let t = Math.floor(samples[0].t) - 1; t >= Math.floor(from); t--) {
    stock = Math.min(view.capacity, stock + (granted.get(t) || 0));
    before.unshift([t, stock]);
  }
  return before.concat(samples.map((s) => [s.t, s.remaining]));
}

/** Every second of the window, zero where nothing was counted. */
function perSecond(grabs, from, value) {
  const at = new Map(grabs.per_second.map((s) => [s.second, s]));
  const points = [];
  for (let t = Math.max(from, grabs.from); t <= grabs.until; t++) points.push([t, at.has(t) ? value(at.get(t)) : 0]);
  return points;
}

const W = 400, H = 180, L = 44, B = 22, T = 8, R = 8;
const NS = 'http://www.w3.org/2000/svg';

function el(name, attrs, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

/** Lines over time: x from `from` to `to` (unix seconds), y from 0 to the largest value. */
function chart(svg, series, from, to, yMax) {
  // Whole numbers on the axis: the top is even, so its half is whole too.
  const highest = Math.ceil(yMax ?? Math.max(0, ...series.flatMap((s) => s.points.map((p) => p[1]))));
  const top = Math.max(2, highest + (highest % 2));
  const x = (t) => L + ((t - from) / Math.max(1, to - from)) * (W - L - R);
  const y = (v) => H - B - (v / top) * (H - B - T);
  const parts = [];
  for (const v of [0, top / 2, top]) {
    parts.push(el('line', { class: 'grid', x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    parts.push(el('text', { x: L - 4, y: y(v) + 4, 'text-anchor': 'end' }, Math.round(v)));
  }
  parts.push(el('line', { class: 'axis', x1: L, x2: L, y1: T, y2: H - B }));
  const span = Math.round(to - from);
  parts.push(el('text', { x: L, y: H - 6 }, span < 120 ? `−${span} s` : `−${Math.round(span / 60)} min`));
  parts.push(el('text', { x: W - R, y: H - 6, 'text-anchor': 'end' }, 'now'));
  for (const s of series) {
    if (!s.points.length) continue;
    parts.push(el('polyline', { class: s.cls, points: s.points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ') }));
  }
  svg.replaceChildren(...parts);
}

function signOut(message) {
  clearInterval(timer);
  timer = null;
  session.forget();
  show(false);
  if (message) $('sign-in-title').textContent = message;
}

async function start() {
  show(true);
  await loadEvents();
  await poll();
  clearInterval(timer);
  let ticks = 0;
  timer = setInterval(async () => {
    // The newest event is looked for every five seconds while following.
    if (following && ++ticks % 5 === 0) await loadEvents();
    await poll().catch((e) => say(`The live view could not be reached (${e.message}); trying again.`, true));
  }, POLL_MS);
}

$('event').addEventListener('change', (e) => {
  following = false;
  $('follow').checked = false;
  choose(e.target.value);
  poll();
});
$('follow').addEventListener('change', (e) => {
  following = e.target.checked;
  if (following) loadEvents().then(poll);
});
$('follow').checked = following;
$('sign-out').addEventListener('click', () => signOut());
signInForm(session, { form: $('token-form'), input: $('token'), hostedLink: $('hosted-ui'), onSignedIn: start });
if (session.token()) start(); else show(false);
