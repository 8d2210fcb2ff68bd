// The organiser's live page: polls GET /admin/events/{id}/live every second and draws the sale:
// its state (opens in, open, sold out at, over), the figures, the requests blocked and why, the
// oldest order not yet stored (amber, then red), a fair open's queue or a ballot's entries and
// their draw, the stock curve, grabs per second by answer, the orders being stored, and the
// audit's checks. The queue's curves are the samples this page has seen, the stock's too (walked
// back by the tallied grants before the first); the rates come from the tallies the server kept
// (the last five minutes, whenever the page opened).
//
// For screen readers: the live region says what changed (the sale's state, the audit, orders
// running late, a problem reaching the API), never the ticking clock; each chart has a name and a
// one-line summary of what it shows.

import { session as open, problem, signInForm } from './sign-in.js';

const session = open(sessionStorage, 'organiser');
const $ = (id) => document.getElementById(id);
const POLL_MS = 1000;
const WINDOW_S = 300;
/** The event list is read again this often while following (a sale may have begun or ended). */
const FOLLOW_EVERY_MS = 5000;

let eventId = new URLSearchParams(location.hash.slice(1)).get('event');
let following = !eventId;
let samples = []; // {t, remaining, inFlight, waiting}
let loop = 0; // the polling loop's generation: signing out ends it
let timer = null;
let listedAt = 0;
let events = [];
let skewMs = 0; // the server's clock minus this one's, from the last view
let told = {}; // what the live region last said, fact by fact

// Plain words for the codes the API answers with.
const OUTCOMES = {
  OK: 'Got a ticket',
  SOLD_OUT: 'Sold out',
  ALREADY: 'Already had one',
  ORDER_CANCELLED: 'Had cancelled',
  SALE_NOT_STARTED: 'Before the open',
  SALE_ENDED: 'After the close',
  BAD_HASH: 'Bad hash',
  RATE_LIMITED: 'Rate limited',
  NOT_ADMITTED: 'Not admitted',
  BALLOT_ONLY: 'Ballot only',
  BUSY: 'Server busy',
};
const BLOCKED = ['BAD_HASH', 'RATE_LIMITED', 'NOT_ADMITTED', 'BALLOT_ONLY'];
const CHECKS = {
  no_ticket_number_twice: ['No ticket sold twice', 'Every confirmed order holds a number of its own.'],
  held_within_capacity: ['Within capacity', 'No more tickets held than the event has.'],
  numbers_accounted: ['Every ticket accounted for', 'Each number is on sale, held, or on its way: none lost, none in two places.'],
  promotions_within_cancellations: ['Waitlist within cancellations', 'No more tickets went to the waitlist than were given back.'],
  tickets_agree_with_orders: ['Tickets match orders', 'The ticket records and the orders say the same.'],
  no_order_rejected: ['No order rejected', 'No user told 202 lost their ticket: a rejected order is one the cache forgot.'],
  every_confirmed_order_mailed: ['Every ticket mailed', 'Each confirmed order had its mail sent.'],
  orders_stored_in_time: ['Orders stored in time', 'No granted order has waited too long to be stored.'],
  red_packet_amounts: ['Red packet amounts', 'The amounts add up to the total, and each ticket holds at least one unit.'],
  ballot_draw: ['Ballot draw', 'The draw recomputes from the entries and the secret, and the orders follow it.'],
  fair_open_draw: ['Fair open draw', 'The queue\'s shuffle recomputes from the entries and the secret.'],
};

// ---- time and numbers in words -------------------------------------------------------------

const serverNow = () => Date.now() + skewMs;
const clock = (iso) => new Date(iso).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });

/** "3.2 s", "45 s", "1 min 20 s", "2 h 5 min", "3 d 4 h". */
function span(seconds) {
  const s = Math.max(0, seconds);
  if (s < 10 && !Number.isInteger(s)) return `${s.toFixed(1)} s`;
  if (s < 60) return `${Math.round(s)} s`;
  const whole = Math.round(s);
  if (whole < 3600) return `${Math.floor(whole / 60)} min${whole % 60 ? ` ${whole % 60} s` : ''}`;
  if (whole < 86400) return `${Math.floor(whole / 3600)} h${Math.floor((whole % 3600) / 60) ? ` ${Math.floor((whole % 3600) / 60)} min` : ''}`;
  return `${Math.floor(whole / 86400)} d${Math.floor((whole % 86400) / 3600) ? ` ${Math.floor((whole % 86400) / 3600)} h` : ''}`;
}

function set(id, value) {
  const text = value === null || value === undefined ? '–' : String(value);
  if ($(id).textContent !== text) $(id).textContent = text;
}

// ---- signing in and out ----------------------------------------------------------------------

function show(signedIn) {
  $('sign-in').classList.toggle('hidden', signedIn);
  $('live').classList.toggle('hidden', !signedIn);
  const claims = session.claims();
  $('who').textContent = signedIn && claims ? `Signed in as ${claims.email || claims.sub}` : '';
}

function signOut(message) {
  loop++;
  clearTimeout(timer);
  timer = null;
  session.forget();
  told = {};
  $('status').textContent = '';
  show(false);
  $('sign-in-message').textContent = message || '';
  if (message) $('token').focus();
}

const NOT_ADMIN = 'This page needs an admin token (a token of the admin group). You have been signed out: sign in with an admin token.';

// ---- the live region: what changed, once --------------------------------------------------

/** Says the facts that changed since the last call; says nothing when none did. */
function tell(facts) {
  const said = [];
  for (const [name, text] of Object.entries(facts)) {
    if (told[name] === text) continue;
    told[name] = text;
    if (text) said.push(text);
  }
  const message = said.join(' ');
  if (message && $('status').textContent !== message) $('status').textContent = message;
}

/** A problem reaching the API (or '' when there is none): said once; its end said once. */
function trouble(text) {
  $('status').classList.toggle('error', Boolean(text));
  tell({ trouble: text || (told.trouble ? 'The live view answers again.' : '') });
}

// ---- the events, and which one to follow ----------------------------------------------------

/**
 * The event on sale now: sale_start <= now < sale_end (several: the latest start); none on
 * sale: the next to open; none to open: the latest to have ended.
 */
function onSaleNow(list, now) {
  const t = (iso) => Date.parse(iso);
  const latest = (xs, key) => xs.reduce((a, b) => (key(b) > key(a) ? b : a), xs[0]);
  const selling = list.filter((e) => t(e.sale_start) <= now && now < t(e.sale_end));
  if (selling.length) return latest(selling, (e) => t(e.sale_start));
  const coming = list.filter((e) => t(e.sale_start) > now);
  if (coming.length) return latest(coming, (e) => -t(e.sale_start));
  return list.length ? latest(list, (e) => t(e.sale_end)) : null;
}

async function loadEvents() {
  listedAt = Date.now();
  const reply = await session.api('/events?limit=100');
  if (reply.status === 401) return signOut('Your token was refused (expired or not valid): sign in again.');
  if (!reply.ok) return trouble(`The event list could not be read: ${await problem(reply)}`);
  ({ events } = await reply.json());
  events.sort((a, b) => (a.sale_start < b.sale_start ? 1 : -1));
  const select = $('event');
  select.replaceChildren(...events.map((e) => new Option(`${e.title} (${e.id})`, e.id)));
  if (following) {
    const pick = onSaleNow(events, serverNow());
    if (pick) choose(pick.id);
  }
  if (eventId && !events.some((e) => e.id === eventId)) select.add(new Option(eventId, eventId));
  if (eventId) select.value = eventId;
}

function choose(id) {
  if (id === eventId) return;
  eventId = id;
  samples = [];
  // A secret pasted for one event is never sent to another.
  $('draw-secret').value = '';
  $('draw-result').textContent = '';
  told = { trouble: told.trouble };
  history.replaceState(null, '', `#event=${encodeURIComponent(id)}`);
}

// ---- polling ---------------------------------------------------------------------------------

async function poll() {
  if (!eventId) {
    trouble('');
    // Said only once the list is read: before, the page is loading, not empty.
    if (listedAt) {
      set('event-title', 'No event yet');
      $('event-title').removeAttribute('aria-busy');
      tell({ event: 'No event yet: release one, and it shows here.' });
    }
    return;
  }
  const asked = eventId;
  const reply = await session.api(`/admin/events/${encodeURIComponent(asked)}/live`);
  if (reply.status === 401) return signOut('Your token was refused (expired or not valid): sign in again.');
  if (reply.status === 403) return signOut(NOT_ADMIN);
  if (asked !== eventId) return; // another event was picked meanwhile
  if (!reply.ok) return trouble(`The live view: ${await problem(reply)}`);
  const view = await reply.json();
  skewMs = Date.parse(view.at) - Date.now();
  render(view);
}

async function start() {
  show(true);
  const mine = ++loop;
  const tick = async () => {
    try {
      if (following && Date.now() - listedAt >= FOLLOW_EVERY_MS) await loadEvents();
      if (mine !== loop) return;
      await poll();
    } catch (e) {
      if (mine === loop) trouble(`The live view could not be reached (${e.message}); trying again.`);
    }
    if (mine === loop) timer = setTimeout(tick, POLL_MS);
  };
  await loadEvents().catch((e) => trouble(`The event list could not be read (${e.message}).`));
  if (mine !== loop) return;
  clearTimeout(timer);
  tick();
}

// ---- drawing the view ------------------------------------------------------------------------

/** The server's names for a state, as the page's. */
const STATE_NAMES = { not_started: 'upcoming', on_sale: 'open', ended: 'over' };

/** The sale's state: from the server's `state` (or, from an older server, the times). */
function saleState(view) {
  const now = Date.parse(view.at);
  const said = String(view.state || '').toLowerCase();
  let state = STATE_NAMES[said] || said;
  if (!['upcoming', 'open', 'sold_out', 'over'].includes(state)) {
    if (now < Date.parse(view.sale_start)) state = 'upcoming';
    else if (now >= Date.parse(view.sale_end)) state = 'over';
    else state = view.remaining === 0 ? 'sold_out' : 'open';
  }
  switch (state) {
    case 'upcoming':
      return { state, text: `Opens in ${span((Date.parse(view.sale_start) - now) / 1000)}`, said: `Opens at ${clock(view.sale_start)}.` };
    case 'open':
      return { state, text: 'Open', said: 'The sale is open.' };
    case 'sold_out': {
      if (!view.sold_out_at) return { state, text: 'Sold out', said: 'Sold out.' };
      const took = (Date.parse(view.sold_out_at) - Date.parse(view.sale_start)) / 1000;
      const text = `Sold out at ${clock(view.sold_out_at)} (in ${took < 1 ? 'under a second' : span(took)})`;
      return { state, text, said: `${text}.` };
    }
    default:
      return { state: 'over', text: 'Over', said: 'The sale is over.' };
  }
}

function render(view) {
  const now = Date.parse(view.at) / 1000;
  if (view.remaining !== null) samples.push({ t: now, remaining: view.remaining, inFlight: view.in_flight, waiting: view.waiting });
  samples = samples.filter((s) => s.t > now - WINDOW_S);
  const when = view.starts_at ? ` · ${new Date(view.starts_at).toLocaleString([], { dateStyle: 'medium', timeStyle: 'short' })}` : '';
  set('event-title', `${view.title} · ${view.capacity} tickets${when}`);
  $('event-title').removeAttribute('aria-busy');
  const state = saleState(view);
  set('sale-state', state.text);
  $('sale-state').dataset.state = state.state;
  set('updated', clock(view.at));
  $('updated').dateTime = view.at;

  set('remaining', view.remaining);
  set('sold', view.remaining === null ? null : view.capacity - view.remaining);
  set('in-flight', view.in_flight);
  set('queue-depth', view.queue_depth ?? null);
  set('waiting', view.waiting);
  const a = view.audit;
  set('confirmed', a.confirmed);
  set('mails-sent', a.mails_sent);
  set('checked-in', a.checked_in);
  set('checked-in-help', a.confirmed
    ? `Tickets let in at a door: ${Math.floor((100 * a.checked_in) / a.confirmed)}% of the ${a.confirmed} confirmed.`
    : 'Tickets let in at a door.');
  doors(a);
  set('cancelled', a.cancelled);
  set('conflicts', a.check_in_conflicts);
  const last = view.grabs.per_second.filter((s) => s.second >= view.grabs.until - 2 && s.second < view.grabs.until);
  const rate = last.reduce((sum, s) => sum + Object.values(s.outcomes).reduce((x, y) => x + y, 0), 0) / 2;
  set('rate', Math.round(rate));

  const lateness = oldest(view);
  blocked(view);
  entries(view);
  const verdict = audit(view, lateness);

  trouble(view.cache === 'live' ? '' : 'The cache cannot be read now: the stock and the waitlist are not shown; the audit still answers.');
  tell({
    event: `Showing ${view.title}.`,
    state: state.said,
    audit: verdict,
    late: lateness.said,
  });
  charts(view, now);
}

/**
 * The oldest granted order not yet stored: its age, amber from `order_late_after_s`, red when the
 * server says stuck (that old, and nothing stored for as long: a big sale's long drain that keeps
 * storing stays amber).
 */
function oldest(view) {
  const o = view.oldest_unconfirmed;
  const lateAfter = view.order_late_after_s ?? 10;
  const stuckAfter = view.order_stuck_after_s ?? 60;
  set('oldest-help', `How long the oldest granted order has waited to be stored: amber from ${lateAfter} s; red from ${stuckAfter} s if no order was stored meanwhile either.`);
  let level = 'none', text = 'None', said = '';
  if (view.oldest_unconfirmed === undefined) text = null;
  else if (o) {
    level = o.stuck ? 'stuck' : o.age_s >= lateAfter ? 'late' : 'ok';
    // Behind other sales' orders on the shared queue (the consumer stores theirs): late, not stuck.
    const queued = !o.stuck && o.behind_other_sales;
    text = `${span(o.age_s)}${level === 'stuck' ? ': stuck' : queued ? ': behind other sales' : level === 'late' ? ': late' : ''}`;
    if (level === 'stuck') said = `Orders are stuck: the oldest has waited over ${stuckAfter} s to be stored, and none was stored meanwhile.`;
    else if (queued) said = `Orders wait behind other sales' orders on the shared queue (${view.queue_depth ?? 'some'} messages): the consumer is storing theirs.`;
    else if (level === 'late') said = `Orders are running late: the oldest has waited over ${lateAfter} s to be stored.`;
  }
  set('oldest-order', text);
  $('oldest-figure').dataset.level = level;
  return { level, said: said || (told.late ? 'Orders are being stored in time again.' : '') };
}

function blocked(view) {
  for (const code of BLOCKED) {
    set(`blocked-${code.toLowerCase().replace(/_/g, '-')}`, view.blocked ? view.blocked[code] ?? 0 : null);
  }
}

/** Check-ins by door, the busiest first. */
function doors(a) {
  const by = Object.entries(a.check_ins_by_door || {}).sort((x, y) => y[1] - x[1] || (x[0] < y[0] ? -1 : 1));
  $('doors').classList.toggle('hidden', !by.length);
  const key = JSON.stringify(by);
  if ($('doors-table').dataset.key === key) return;
  $('doors-table').dataset.key = key;
  const total = by.reduce((sum, [, n]) => sum + n, 0);
  $('doors-table').replaceChildren(...by.map(([name, n]) => {
    const row = document.createElement('tr');
    row.dataset.door = name;
    for (const text of [name, String(n), `${Math.round((100 * n) / total)}%`]) {
      const cell = document.createElement('td');
      cell.textContent = text;
      row.append(cell);
    }
    return row;
  }));
}

/** A fair open's queue or a ballot's entries, and the draw. */
function entries(view) {
  const e = view.entries;
  $('entries').classList.toggle('hidden', !e);
  if (!e) return;
  const fair = e.mode === 'fair_open';
  for (const el of document.querySelectorAll('#entries .fair-open-only')) el.classList.toggle('hidden', !fair);
  set('entries-title', fair ? 'Fair open: the queue' : 'Ballot: the entries');
  set('entered-label', fair ? 'In the queue' : 'Entries');
  set('entered-help', fair ? 'People who joined the queue.' : 'People who entered the ballot.');
  set('entered', e.entered);
  set('late', e.late);
  set('drawn-at', e.drawn_at ? clock(e.drawn_at) : 'Not yet');
  const now = Date.parse(view.at);
  let summary;
  if (!e.drawn_at) {
    summary = `Not drawn yet: the draw can run from the sale's start (${clock(view.sale_start)}). ${fair
      ? 'It shuffles the queue; the queue then lets people through in that order.'
      : 'It picks who gets the tickets; the rest wait in draw order.'}`;
  } else if (fair) {
    set('admitted', e.admitted);
    set('admission-rate', e.admission_rate);
    const all = e.all_admitted_at;
    let allText = null;
    if (all) {
      const left = (Date.parse(all) - now) / 1000;
      allText = left > 0 ? `${clock(all)} (in ${span(left)})` : `${clock(all)} (took ${span((Date.parse(all) - Date.parse(e.drawn_at)) / 1000)})`;
    }
    set('all-admitted', allText);
    summary = `Drawn at ${clock(e.drawn_at)}: ${e.admitted ?? 0} of ${e.entered} let through, ${e.admission_rate ?? '–'} a second${all ? `; everyone by ${clock(all)}` : ''}.`;
  } else {
    summary = `Drawn at ${clock(e.drawn_at)}${e.done ? '' : ': still handing out the orders (run the draw again to finish it)'}.`;
  }
  set('entries-summary', summary);
  const drawable = !e.drawn_at || (!fair && e.done === false);
  $('draw-form').classList.toggle('hidden', !drawable);
  const beacon = view.draw && view.draw.beacon;
  $('beacon-field').classList.toggle('hidden', !beacon);
  $('draw-beacon').required = Boolean(beacon);
  if (beacon) set('beacon-round', String(beacon.round));
}

/** The audit's checks; the heading is never green while a check fails or orders are stuck. */
function audit(view, lateness) {
  const a = view.audit;
  const failed = a.checks.filter((c) => !c.passed && !c.pending);
  const waiting = a.checks.filter((c) => c.pending);
  const stuck = lateness.level === 'stuck';
  let text, cls;
  if (failed.length || !a.passed || stuck) {
    const names = failed.map((c) => (CHECKS[c.name] || [c.name.replace(/_/g, ' ')])[0]);
    if (stuck && !failed.some((c) => c.name === 'orders_stored_in_time')) names.push('orders stored in time');
    text = names.length > 1 ? `${names.length} checks failed` : 'a check failed';
    cls = 'fail';
  } else if (waiting.length) {
    text = `every check so far passed (${waiting.length} waiting)`;
    cls = 'pass';
  } else {
    text = 'every check passed';
    cls = 'pass';
  }
  set('audit-state', text);
  $('audit-state').className = cls;
  set('audit-as-of', clock(a.as_of));
  $('audit-as-of').dateTime = a.as_of;
  const key = JSON.stringify(a.checks.map((c) => [c.name, c.passed, c.pending, c.detail]));
  if ($('checks').dataset.key !== key) {
    $('checks').dataset.key = key;
    $('checks').replaceChildren(...a.checks.map((c) => {
      const li = document.createElement('li');
      const kind = c.pending ? 'pending' : c.passed ? 'pass' : 'fail';
      li.className = kind;
      li.dataset.check = c.name;
      li.dataset.passed = String(c.passed);
      if (c.pending) li.dataset.pending = 'true';
      const badge = document.createElement('span');
      badge.className = 'badge';
      badge.textContent = { pending: 'waiting', pass: 'pass', fail: 'fail' }[kind];
      const [label, help] = CHECKS[c.name] || [c.name.replace(/_/g, ' '), ''];
      const name = document.createElement('strong');
      name.textContent = label;
      const helpText = document.createElement('span');
      helpText.className = 'help';
      helpText.textContent = help;
      li.append(badge, name, `: ${c.detail}`, ...(help ? [document.createElement('br'), helpText] : []));
      return li;
    }));
  }
  return cls === 'fail' ? `Audit: ${text}.` : (told.audit ? `Audit: ${text}.` : '');
}

// ---- the charts ------------------------------------------------------------------------------

function charts(view, now) {
  // The charts span the sale seen so far (at least a minute, at most the window).
  const counted = view.grabs.per_second.map((s) => s.second);
  const first = Math.min(samples.length ? samples[0].t : now, counted.length ? counted[0] : now);
  const from = Math.max(now - WINDOW_S, Math.min(first - 5, now - 60));
  const spanText = `the last ${span(now - from)}`;

  const stock = stockCurve(view, from);
  chart($('stock-chart'), [{ cls: 's0', points: stock }], from, now, view.capacity);
  summarise('stock-summary', stock.length
    ? `${stock[0][1]} of ${view.capacity} tickets were left ${span(now - stock[0][0])} ago; ${stock[stock.length - 1][1]} now.`
    : 'No stock figure yet (the cache cannot be read).');

  const seen = new Set(view.grabs.per_second.flatMap((s) => Object.keys(s.outcomes)));
  const outcomes = [...Object.keys(OUTCOMES).filter((o) => seen.has(o)), ...[...seen].filter((o) => !OUTCOMES[o]).sort()];
  const series = outcomes.map((o, i) => ({
    cls: `s${i % 7}`,
    code: o,
    points: perSecond(view.grabs, Math.floor(from), (s) => s.outcomes[o] || 0),
  }));
  chart($('rates-chart'), series, from, now);
  const legendKey = outcomes.join();
  if ($('rates-legend').dataset.key !== legendKey) {
    $('rates-legend').dataset.key = legendKey;
    $('rates-legend').replaceChildren(...series.map((s) => {
      const li = document.createElement('li');
      li.className = s.cls;
      li.dataset.outcome = s.code;
      li.textContent = OUTCOMES[s.code] || s.code.replace(/_/g, ' ').toLowerCase();
      return li;
    }));
  }
  const totals = series.map((s) => [OUTCOMES[s.code] || s.code, s.points.reduce((x, p) => x + p[1], 0)]).filter(([, n]) => n);
  totals.sort((x, y) => y[1] - x[1]);
  summarise('rates-summary', totals.length
    ? `Over ${spanText}: ${totals.map(([name, n]) => `${n} ${name.toLowerCase()}`).join(', ')}; ${$('rate').textContent} a second now.`
    : `No grab requests over ${spanText}.`);

  chart($('queue-chart'), [
    { cls: 's0', points: samples.map((s) => [s.t, s.inFlight]) },
    { cls: 's3', points: samples.map((s) => [s.t, s.waiting]) },
  ], from, now);
  const most = (key) => Math.max(0, ...samples.map((s) => s[key] ?? 0));
  const latest = samples[samples.length - 1];
  summarise('queue-summary', latest
    ? `Being stored: ${latest.inFlight} now, at most ${most('inFlight')}. Waitlist: ${latest.waiting} now, at most ${most('waiting')}.`
    : 'No figures yet (the cache cannot be read).');
}

function summarise(id, text) {
  if ($(id).textContent !== text) $(id).textContent = text;
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
  // Before second t's grants (t from the first sample's own second back): the stock plus them.
  for (let t = Math.floor(samples[0].t); t > Math.floor(from); t--) {
    stock = Math.min(view.capacity, stock + (granted.get(t) || 0));
    before.unshift([t - 1, stock]);
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

/**
 * Lines over time: x from `from` to `to` (unix seconds), y from 0 to the largest value. The
 * axes' numbers are hidden from screen readers: the chart's name and summary say what it shows.
 */
function chart(svg, series, from, to, yMax) {
  // Whole numbers on the axis: the top is even, so its half is whole too.
  const highest = Math.ceil(yMax ?? Math.max(0, ...series.flatMap((s) => s.points.map((p) => p[1]))));
  const top = Math.max(2, highest + (highest % 2));
  const x = (t) => L + ((t - from) / Math.max(1, to - from)) * (W - L - R);
  const y = (v) => H - B - (v / top) * (H - B - T);
  const parts = [];
  const hidden = { 'aria-hidden': 'true' };
  for (const v of [0, top / 2, top]) {
    parts.push(el('line', { class: 'grid', x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    parts.push(el('text', { ...hidden, x: L - 4, y: y(v) + 4, 'text-anchor': 'end' }, Math.round(v)));
  }
  parts.push(el('line', { class: 'axis', x1: L, x2: L, y1: T, y2: H - B }));
  const spanS = Math.round(to - from);
  parts.push(el('text', { ...hidden, x: L, y: H - 6 }, spanS < 120 ? `−${spanS} s` : `−${Math.round(spanS / 60)} min`));
  parts.push(el('text', { ...hidden, x: W - R, y: H - 6, 'text-anchor': 'end' }, 'now'));
  for (const s of series) {
    if (!s.points.length) continue;
    parts.push(el('polyline', { class: s.cls, points: s.points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ') }));
  }
  svg.replaceChildren(...parts);
}

// ---- the draw --------------------------------------------------------------------------------

/** Runs the draw with the secret pasted here: sent once in the body, never kept, cleared at once. */
async function draw(e) {
  e.preventDefault();
  const ev = eventId;
  const secret = $('draw-secret').value.trim().toLowerCase();
  const signature = $('draw-beacon').value.trim().toLowerCase();
  $('draw-secret').value = '';
  const result = $('draw-result');
  result.classList.remove('error');
  if (!/^[0-9a-f]{64}$/.test(secret)) {
    result.classList.add('error');
    result.textContent = 'The secret is 64 hex characters (0-9, a-f): paste it again.';
    return;
  }
  const body = { secret };
  if (!$('beacon-field').classList.contains('hidden')) body.beacon_signature = signature;
  const button = $('draw-form').querySelector('button');
  button.disabled = true;
  result.textContent = 'Running the draw…';
  try {
    // One ask of a draw takes up to release's 15 s (more patience than a poll's); a large draw
    // answers 202 with how far it got, and goes on when asked again.
    // A 503 (a dependency failed) loses nothing of the draw either: asked again a few times.
    let reply;
    for (let failures = 0; ; ) {
      reply = await session.api(`/admin/events/${encodeURIComponent(ev)}/draw`, {
        signal: AbortSignal.timeout(30_000),
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      if (reply.status === 503 && ++failures <= 5) {
        result.textContent = `The draw was cut off (${failures} of 5 tries); asking again…`;
      } else if (reply.status === 202) {
        const p = await reply.json();
        result.textContent = `Drawing: ${p.shards_read} of ${p.shards} shards of the entries read, ${p.places_laid} places laid down…`;
      } else {
        break;
      }
      const wait = Number(reply.headers.get('retry-after')) || 1;
      await new Promise((resolve) => setTimeout(resolve, wait * 1000));
    }
    if (reply.status === 401) return signOut('Your token was refused (expired or not valid): sign in again.');
    if (reply.ok) {
      const d = await reply.json();
      $('draw-beacon').value = '';
      result.textContent = d.sale_mode === 'fair_open'
        ? `Drawn at ${clock(d.drawn_at)}: ${d.entrants} in the queue shuffled; the queue lets them through from ${clock(d.admits_from || d.drawn_at)}.`
        : `Drawn at ${clock(d.drawn_at)}: ${d.entrants} entries, ${d.winners ?? 0} get a ticket, ${d.waiting ?? 0} wait in draw order.`;
    } else {
      result.classList.add('error');
      result.textContent = `The draw did not run: ${await problem(reply)}`;
    }
  } catch (err) {
    result.classList.add('error');
    result.textContent = `The draw could not be sent (${err.message}): try again.`;
  } finally {
    button.disabled = false;
  }
}

// ---- wiring ----------------------------------------------------------------------------------

$('event').addEventListener('change', (e) => {
  following = false;
  $('follow').checked = false;
  choose(e.target.value);
  $('draw-result').textContent = '';
});
$('follow').addEventListener('change', (e) => {
  following = e.target.checked;
  listedAt = 0;
});
$('follow').checked = following;
$('draw-form').addEventListener('submit', draw);
$('sign-out').addEventListener('click', () => signOut());
signInForm(session, { form: $('token-form'), input: $('token'), hostedLink: $('hosted-ui'), onSignedIn: start });
if (session.token()) start(); else show(false);
