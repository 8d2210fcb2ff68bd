"""The pages in a real browser (scripts/browser starts a runner and calls this).

Headless Chromium from Debian, driven by Playwright:

1. The organiser's page during a small sale (40 users for 12 tickets) and 20 forged grabs: once
   the report endpoint says the sale has drained, the page's figures (read from its DOM) are the
   report's, its audit is green, it says "Sold out at hh:mm:ss (in x s)", the forged grabs show
   under "Bad hash", the legend is in words (no raw codes), each chart has a name saying what it
   shows and a summary of it, and the live region says nothing new between two polls. Then:
   - orders granted while the runner's mail consumer is held (`/_local/mail-consumer`, as
     `loadgen --hold-mail`): on a page left open meanwhile, the oldest unstored order's age goes
     amber, then red; the audit is not green and its check `orders_stored_in_time` failed; once
     the consumer runs again the orders are stored;
   - at a phone's width (390 px): the hosted sign-in link carries this tab's random state, a reply
     with another state is refused (no token kept); a token without the admin group is told so
     and signed out (that tab polls nothing more); "follow" shows the event on sale now, not one
     whose sale starts later (its long title does not widen the page: no horizontal scroll); the
     later one, picked, says "Opens in 59 min ...";
   - a fair open: its queue (3 joined), its draw shown waiting, not passed; the draw run from the
     page (a password field; a wrong secret's refusal shown; the right one sent once in the body,
     kept in no storage, the field cleared), then admitted, the rate and when all are admitted; a
     verify-hash without admission counted under "Not admitted";
   - a ballot naming a beacon round: its entries, a grab at it counted under "Ballot only", the
     draw's form asking for the round's signature (a wrong one refused, the refusal shown);
   - check-ins by door (Gate A, Gate B) listed busiest first;
   - axe-core: no serious or critical violation on the sign-in, a sold-out sale, the phone's live
     view, a fair open before and after its draw, a ballot, and stuck orders.
   Screenshots: <out>/organiser.png (the sale) and organiser-*.png.
2. The door's page (a phone's width, 390 px) with real passes from real mail (the local SES):
   - a fan's token at setup is refused (the check-in route, not the public pass keys, decides);
     the heading shows the event's title and "checked in x of N";
   - a pass-key rotation with the door open (simulated: the device holds only a key from before;
     the local runner's keys do not rotate): the door fetches the keys again and lets the pass in;
   - a keyboard-wedge scanner: two passes typed with Enter in a row, both let in, the field cleared
     and focused; the same pass read again at once repeats its verdict ("Let in"), with a tone and
     a vibration; a tampered pass, another event's pass, one another door took, and a pass let in
     here are refused or "Already in", each its own colour, word and shape;
   - with the network cut, the page opens from its service worker and checks passes with keys two
     days old, while the staff token expires; back online, the sync meets 401: both check-ins stay,
     "waiting for sign-in"; a fan's token is refused at the scanner's sign-in, a staff token sends
     them: the server holds the check-in at its offline time, and the pass another door took first
     is shown as that conflict and counted by the audit; the stale keys are fetched again;
   - a holder whose phone died: looked up by ticket number and let in by it (the server holds it);
     by order id, one already in has no "Let in"; a change of event clears the last verdict;
   - every state (setup refused, a verdict shown, offline, waiting for sign-in, synced, a lookup):
     no horizontal scroll at 390 px and axe-core with no serious or critical violation.
   Screenshots: <out>/door.png (a verdict beside the scanner after the sync) and door-*.png.
2b. Where the door let the wrong person in (door_faults, each case its own; BROWSER_GO_ON=1 runs
   them all and fails at the end): a forged pass naming an unknown key, "Already in" naming the
   door, a repeat within 2 s, the sign-in ending and ended, the tone's checkbox, a hanging network,
   day-old keys on a hanging network, a browser without Ed25519, an event switched with check-ins
   unsent. The sign-in renewed through a stand-in user pool (door_renewal). A night at the door
   (door_shift): 3 hours on the page's clock, 300 passes, an outage, a key rotation, two renewals,
   a sign-in ended: 0 wrong greens, every check-in on the server.
3. The door's camera: Chromium's fake camera plays a video of a real pass's QR code (drawn with
   segno from the pass in the mail); the page reads it (jsQR, or the browser's BarcodeDetector
   where it reads QR codes) and lets the ticket in, the preview above the field; the pass stays in
   view for 5 s more and the verdict stays "Let in" (never "Already in"); the stop button stops it.
4. The API reference: its one server is the page's own origin ("Try it out" calls it, not the
   spec's http://127.0.0.1:3000); its header links to the organiser's and the door's pages.

Exits non-zero on the first failure, with what was expected and what was seen.
"""

import argparse
import base64
import concurrent.futures
import contextlib
import hashlib
import hmac
import json
import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timedelta, timezone

import segno
from playwright.sync_api import expect, sync_playwright

parser = argparse.ArgumentParser()
parser.add_argument("--url", required=True)
parser.add_argument("--mailbox", required=True, help="the emulator's endpoint (its SES messages)")
parser.add_argument("--run", required=True, help="a name for this run's events and users")
parser.add_argument("--jwt-secret", required=True)
parser.add_argument("--axe", required=True, help="axe.min.js")
parser.add_argument("--out", required=True)
parser.add_argument("--chromium", default="/usr/bin/chromium")
parser.add_argument("--only", default="", help="while developing: only these parts, comma-separated (door-faults, door-renewal, door-shift)")
args = parser.parse_args()
RUN = re.sub(r"[^A-Za-z0-9-]", "-", args.run)[-40:]
# Condition waits: how long a drain or a page update may take before the test says it did not.
PATIENCE_S = 90


def fail(message):
    print(f"browser: FAILED: {message}", file=sys.stderr)
    sys.exit(1)


class CheckFailed(Exception):
    pass


# While developing (BROWSER_GO_ON=1): a failed check ends its case, not the run, so a page from
# before a fix shows every case it fails.
GO_ON = os.environ.get("BROWSER_GO_ON") == "1"


def check(condition, message):
    if not condition:
        if GO_ON:
            raise CheckFailed(message)
        fail(message)
    print(f"browser: ok: {message}")


@contextlib.contextmanager
def case(name):
    """One case of a test; with BROWSER_GO_ON=1 its failure is said and the next case runs."""
    try:
        yield
    except Exception as e:
        if not GO_ON:
            raise
        print(f"browser: FAILED (going on): {name}: {str(e).splitlines()[0][:300]}")
        CASES_FAILED.append(name)


CASES_FAILED = []


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def token(sub, groups=(), email=True):
    """A development token, as the runner's authorizer takes them (HS256)."""
    now = int(time.time())
    claims = {"sub": sub, "exp": now + 3600, "iat": now}
    if email:
        claims.update(email=f"{sub}@example.com", email_verified=True)
    if groups:
        claims["cognito:groups"] = list(groups)
    head = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64url(json.dumps(claims).encode())
    sig = hmac.new(args.jwt_secret.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64url(sig)}"


def api(method, path, tok, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(args.url + path, data=data, method=method,
                                 headers={"authorization": f"Bearer {tok}", "content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def wait_for(what, probe):
    """Polls `probe` until it returns a truthy value (no fixed sleep decides anything)."""
    deadline = time.time() + PATIENCE_S
    while time.time() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.25)
    fail(f"{what}: not within {PATIENCE_S} s")


ADMIN = token(f"{RUN}-organiser", groups=["admin"])
STAFF = token(f"{RUN}-door", groups=["staff"])


def release(suffix, capacity):
    event_id = f"{RUN}-{suffix}"
    now = datetime.now(timezone.utc)
    status, body = api("POST", "/admin/events", ADMIN, {
        "id": event_id, "title": f"Browser test {suffix}", "capacity": capacity,
        "sale_start": (now + timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "sale_end": (now + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    })
    check(status == 201, f"event {event_id} released ({status} {body})")
    return event_id


def grab(event_id, user):
    """One fan's grab, tried from just before the open until the sale answers (403 before it)."""
    tok = token(user)
    deadline = time.time() + 20
    while True:
        status, body = api("GET", f"/events/{event_id}/verify-hash", tok)
        if status == 200:
            status, body = api("POST", f"/events/{event_id}/grab", tok, {"hash": body["hash"]})
        if not (status == 403 and body.get("code") == "SALE_NOT_STARTED"):
            return status, body
        if time.time() > deadline:
            fail(f"the sale of {event_id} did not open for {user}")
        time.sleep(0.2)


def sale(event_id, users):
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        return list(pool.map(lambda u: (u, grab(event_id, u)), users))


def drained(event_id, capacity):
    def probe():
        status, report = api("GET", f"/admin/events/{event_id}/report", ADMIN)
        done = status == 200 and report["confirmed"] == capacity and report["mails_sent"] == capacity
        return report if done else None
    return wait_for(f"{event_id}: every ticket confirmed and mailed", probe)


def passes(event_id):
    """Ticket pass -> address, from the mail the local SES accepted for this event."""
    with urllib.request.urlopen(f"{args.mailbox}/_ministack/ses/messages", timeout=30) as r:
        listing = json.load(r)
    found = {}
    for mail in (m for ms in listing["messages"].values() for m in ms):
        text = json.dumps(mail)
        for p in re.findall(r"TP2\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+", text):
            payload = json.loads(base64.urlsafe_b64decode(p.split(".")[1] + "=="))
            if payload["e"] == event_id:
                found[p] = payload
    return found


def axe(page, name):
    # Through the DevTools protocol: the pages' CSP (rightly) refuses an injected script tag.
    with open(args.axe) as f:
        page.evaluate(f.read() + "\n;true")
    result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    serious = [v for v in result["violations"] if v["impact"] in ("serious", "critical")]
    check(not serious, f"{name}: axe-core finds no serious violation "
                       f"({[(v['id'], v['impact'], len(v['nodes'])) for v in serious]})")


STRAYS = []


def watch(page):
    """Every request a page makes must go to the runner: nothing from a CDN or elsewhere."""
    def seen(request):
        if not request.url.startswith((args.url, "data:", "blob:")):
            STRAYS.append(request.url)
    page.on("request", seen)
    return page


def launch(p, extra=()):
    return p.chromium.launch(executable_path=args.chromium, headless=True, args=[
        "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", *extra])


def organiser(browser):
    capacity, crowd = 12, 40
    event_id = release("sale", capacity)
    page = watch(browser.new_page(viewport={"width": 1280, "height": 1100}))
    page.goto(f"{args.url}/pages/organiser.html#event={event_id}")
    page.fill("#token", ADMIN)
    page.click("#token-form button[type=submit]")
    expect(page.locator("#event-title")).to_contain_text("Browser test sale", timeout=15_000)

    results = sale(event_id, [f"{RUN}-fan-{i}" for i in range(crowd)])
    granted = sum(1 for _, (s, _) in results if s == 202)
    check(granted == capacity, f"the sale granted exactly {capacity} of {crowd} grabs ({granted}; {sorted(set(str(r) for _, r in results))[:3]})")
    # Forged grabs: a hash the server never gave. Refused before the sale's gate; the page counts them.
    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        forged = list(pool.map(lambda i: api("POST", f"/events/{event_id}/grab", token(f"{RUN}-forger-{i}"),
                                             {"hash": "forged.0.AAAA"}), range(20)))
    check(all(s == 403 and b.get("code") == "BAD_HASH" for s, b in forged), f"20 forged grabs are refused as BAD_HASH ({forged[:2]})")
    report = drained(event_id, capacity)

    # The page shows what the report says, once its audit is taken after the drain (at most 5 s).
    for field, dom in [("confirmed", "#confirmed"), ("mails_sent", "#mails-sent"), ("checked_in", "#checked-in"),
                       ("cancelled", "#cancelled"), ("check_in_conflicts", "#conflicts")]:
        expect(page.locator(dom)).to_have_text(str(report[field]), timeout=PATIENCE_S * 1000)
    expect(page.locator("#remaining")).to_have_text("0", timeout=15_000)
    expect(page.locator("#sold")).to_have_text(str(capacity), timeout=15_000)
    expect(page.locator("#in-flight")).to_have_text("0", timeout=15_000)
    expect(page.locator("#audit-state")).to_have_text("every check passed")
    shown = page.locator("#checks li").evaluate_all("els => els.map(e => [e.dataset.check, e.dataset.passed])")
    check(sorted(shown) == sorted([c["name"], "true"] for c in report["checks"]),
          f"the page lists the report's checks, each passed ({shown})")
    # The sale's state at a glance: sold out, when, and how long it took.
    expect(page.locator("#sale-state")).to_have_attribute("data-state", "sold_out", timeout=15_000)
    expect(page.locator("#sale-state")).to_have_text(re.compile(r"^Sold out at \d\d:\d\d:\d\d \(in ([0-9.]+ s|[0-9]+ min( [0-9]+ s)?|under a second)\)$"))
    check(True, f"the page says when the sale sold out: {page.locator('#sale-state').text_content()!r}")
    # Blocked requests by reason, in words.
    expect(page.locator("#blocked-bad-hash")).to_have_text("20", timeout=15_000)
    expect(page.locator("#blocked li[data-blocked=BAD_HASH]")).to_contain_text("Bad hash")
    check(True, "the 20 forged grabs show under bad hash")
    # The rates: the tallies reach the page within a couple of seconds of the grabs; the legend in words.
    expect(page.locator("#rates-legend li[data-outcome=OK]")).to_have_text("Got a ticket", timeout=15_000)
    expect(page.locator("#rates-legend li[data-outcome=SOLD_OUT]")).to_have_text("Sold out")
    legend = page.locator("#rates-legend").text_content()
    check(not re.search(r"[A-Z]{2,}_[A-Z]", legend), f"the legend has no raw codes ({legend!r})")
    check(page.locator("#rates-chart polyline").count() >= 2, "the rates chart draws a line per outcome")
    check(page.locator("#stock-chart polyline").count() == 1, "the stock curve is drawn")
    # Each chart: a name that says what it shows, and a summary of it (the axes' numbers are not its name).
    expect(page.locator("#stock-chart")).to_have_accessible_name("Tickets left on sale over time")
    expect(page.locator("#stock-chart")).to_have_accessible_description(re.compile(rf"of {capacity} tickets were left .*; 0 now"))
    expect(page.locator("#rates-chart")).to_have_accessible_name("Grab requests a second, by answer")
    expect(page.locator("#rates-chart")).to_have_accessible_description(re.compile(rf"^(?=.*\b{capacity} got a ticket\b)(?=.*\b20 bad hash\b)"))
    expect(page.locator("#queue-chart")).to_have_accessible_name("Orders being stored, and the waitlist, over time")
    expect(page.locator("#queue-chart")).to_have_accessible_description(re.compile(r"^Being stored: 0 now"))
    check(True, "each chart has a name and a summary of what it shows")
    quiet_between_polls(page, "a drained sale")
    page.screenshot(path=os.path.join(args.out, "organiser.png"), full_page=True)
    axe(page, "the organiser's page (a sale sold out)")
    page.close()
    return event_id, results


def quiet_between_polls(page, what):
    """The live region says nothing new between two polls when nothing changed (the ticking time is elsewhere)."""
    said = page.locator("#status").text_content()
    for _ in range(2):
        before = page.locator("#updated").text_content()
        expect(page.locator("#updated")).not_to_have_text(before, timeout=10_000)
    again = page.locator("#status").text_content()
    check(said == again and "Live at" not in again,
          f"{what}: the live region is quiet while nothing changes ({said!r}, then {again!r})")
    check(page.locator("#updated").evaluate("e => !e.closest('[aria-live], [role=status], [role=alert]')"),
          f"{what}: the ticking time is outside the live region")


def release_event(suffix, capacity, start, title=None, **extra):
    """An event of this run whose sale starts at `start` (a datetime), with any other release fields."""
    event_id = f"{RUN}-{suffix}"
    body = {"id": event_id, "title": title or f"Browser test {suffix}", "capacity": capacity,
            "sale_start": start.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "sale_end": (datetime.now(timezone.utc) + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ"), **extra}
    status, reply = api("POST", "/admin/events", ADMIN, body)
    check(status == 201, f"event {event_id} released ({status} {reply})")
    return event_id


def mail_consumer(enabled):
    """The local runner's switch of the mail consumer (what `loadgen --hold-mail` uses)."""
    status, body = api("PUT", "/_local/mail-consumer", ADMIN, {"enabled": enabled})
    check(status == 200 and body.get("enabled") is enabled, f"the runner's mail consumer {'resumed' if enabled else 'held'} ({status} {body})")


def hold_orders(browser):
    """Orders granted while the mail consumer is held stay unstored: the page, left open, sees them age."""
    mail_consumer(False)
    event_id = release("stuck", 3)
    results = sale(event_id, [f"{RUN}-stuck-fan-{i}" for i in range(3)])
    check(all(s == 202 for _, (s, _) in results), f"three orders granted while the mail is held ({results[:1]})")
    page = watch(browser.new_page(viewport={"width": 1280, "height": 1100}))
    page.goto(f"{args.url}/pages/organiser.html#event={event_id}")
    page.fill("#token", ADMIN)
    page.click("#token-form button[type=submit]")
    expect(page.locator("#oldest-order")).to_have_text(re.compile(r"^[0-9.]+ s"), timeout=15_000)
    # Every level the figure passes through, kept by the page's own DOM (the other tests run meanwhile).
    page.evaluate("""() => {
        const figure = document.getElementById('oldest-figure');
        window.levels = [figure.dataset.level];
        new MutationObserver(() => window.levels.push(figure.dataset.level)).observe(figure, {attributes: true});
    }""")
    return event_id, page


def organiser_stuck(held):
    """The orders held since hold_orders: amber, then red, the audit failed; stored once the mail runs again."""
    event_id, page = held
    expect(page.locator("#oldest-figure")).to_have_attribute("data-level", "stuck", timeout=PATIENCE_S * 1000)
    seen = page.evaluate("window.levels")
    levels = [lv for i, lv in enumerate(seen) if i == 0 or lv != seen[i - 1]]
    check("late" in levels and levels.index("late") < levels.index("stuck"),
          f"the oldest unstored order's age went amber, then red ({levels}; {page.locator('#oldest-order').text_content()!r})")
    expect(page.locator("#checks li[data-check=orders_stored_in_time]")).to_have_attribute("data-passed", "false", timeout=15_000)
    expect(page.locator("#audit-state")).to_have_class("fail")
    expect(page.locator("#audit-state")).to_contain_text("failed")
    expect(page.locator("#status")).to_contain_text("stuck")
    check(True, "stuck orders: the audit is not green, its check says why, and the live region said so")
    page.screenshot(path=os.path.join(args.out, "organiser-stuck.png"), full_page=True)
    axe(page, "the organiser's page (orders stuck, a check failed)")
    mail_consumer(True)
    expect(page.locator("#oldest-figure")).to_have_attribute("data-level", "none", timeout=30_000)
    expect(page.locator("#in-flight")).to_have_text("0", timeout=15_000)
    check(True, "the held orders are stored once the mail runs again")
    # Check-ins by door: which entrances are busy.
    for n, door_name in [(1, "Gate A"), (2, "Gate A"), (3, "Gate B")]:
        status, body = api("POST", f"/admin/events/{event_id}/check-in", STAFF, {"ticket_no": n, "door": door_name})
        check(status == 200, f"ticket {n} checked in at {door_name} ({status} {body})")
    expect(page.locator("#doors-table tr")).to_have_count(2, timeout=15_000)
    rows = page.locator("#doors-table tr").evaluate_all("rows => rows.map(r => [...r.cells].map(c => c.textContent))")
    check(rows == [["Gate A", "2", "67%"], ["Gate B", "1", "33%"]], f"the page shows check-ins by door, the busiest first ({rows})")
    expect(page.locator("#checked-in-help")).to_contain_text("100% of the 3 confirmed")
    page.close()


def organiser_phone(browser):
    """A phone's width; the hosted sign-in's state; a token without the admin group; following the event on sale now."""
    later = release_event("later", 5, datetime.now(timezone.utc) + timedelta(hours=1),
                          title="Browser test later: the season's closing night, with the full orchestra, the choir and "
                                "guests, in the large hall (doors open an hour before)")
    now = release_event("now", 5, datetime.now(timezone.utc) + timedelta(seconds=1))
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = watch(context.new_page())
    state_key = "ticket-grab.organiser.sign-in-state"

    # The hosted UI's link carries a fresh state, kept for this tab.
    page.route("**/pages/config.json", lambda route: route.fulfill(
        json={"cognito": {"hosted_ui": "https://auth.example.test", "client_id": "browser-test"}}))
    page.goto(f"{args.url}/pages/organiser.html")
    expect(page.locator("#hosted-ui")).to_be_visible(timeout=15_000)
    href = page.locator("#hosted-ui").get_attribute("href")
    kept = page.evaluate(f"() => sessionStorage.getItem('{state_key}')")
    check(kept and len(kept) >= 16 and f"state={kept}" in href, f"the hosted sign-in link carries this tab's random state ({href})")
    axe(page, "the organiser's page (sign-in, 390 px)")
    page.unroute("**/pages/config.json")

    # A reply from the hosted UI whose state this tab did not send is refused.
    page.goto("about:blank")
    page.goto(f"{args.url}/pages/organiser.html#id_token={ADMIN}&state=wrong")
    expect(page.locator("#sign-in")).to_be_visible(timeout=15_000)
    expect(page.locator("#sign-in-message")).to_contain_text("refused")
    stored = page.evaluate("() => sessionStorage.getItem('ticket-grab.organiser.token')")
    check(stored is None and "id_token" not in page.url, f"a sign-in with a wrong state is refused: no token kept ({page.url})")

    # A token without the admin group: told so, and signed out (no polling of a 403 every second).
    staff = watch(context.new_page())
    staff.goto(f"{args.url}/pages/organiser.html")
    staff.fill("#token", STAFF)
    staff.click("#token-form button[type=submit]")
    expect(staff.locator("#sign-in-message")).to_contain_text("needs an admin token", timeout=15_000)
    expect(staff.locator("#sign-in")).to_be_visible()
    check(staff.evaluate("() => sessionStorage.getItem('ticket-grab.organiser.token')") is None,
          "a token without the admin group is told so and signed out")
    polled = []
    staff.on("request", lambda r: polled.append(r.url) if "/live" in r.url else None)

    # The hosted UI's reply with this tab's state signs in; following picks the event on sale now
    # (not the later one, whose sale starts last).
    page.evaluate(f"() => sessionStorage.setItem('{state_key}', 'browser-test-state')")
    page.goto("about:blank")
    page.goto(f"{args.url}/pages/organiser.html#id_token={ADMIN}&state=browser-test-state")
    expect(page.locator("#live")).to_be_visible(timeout=15_000)
    check("id_token" not in page.url, "the hosted sign-in with this tab's state signs in, and the token leaves the address")
    expect(page.locator("#follow")).to_be_checked()
    expect(page.locator("#event-title")).to_contain_text("Browser test now", timeout=15_000)
    expect(page.locator("#sale-state")).to_have_attribute("data-state", "open", timeout=15_000)
    check(page.locator(f"#event option[value='{later}']").count() == 1,
          "following: the event on sale now is shown, not the one whose sale starts later")
    width = page.evaluate("() => document.documentElement.scrollWidth")
    check(width <= 390, f"at 390 px the page does not scroll sideways (scrollWidth {width})")
    quiet_between_polls(page, "an open sale")
    page.screenshot(path=os.path.join(args.out, "organiser-phone.png"), full_page=True)
    axe(page, "the organiser's page (live, 390 px)")

    # Picking the later event stops following and says when it opens.
    page.select_option("#event", later)
    expect(page.locator("#follow")).not_to_be_checked()
    expect(page.locator("#sale-state")).to_have_attribute("data-state", "upcoming", timeout=15_000)
    expect(page.locator("#sale-state")).to_have_text(re.compile(r"^Opens in (59 min( \d+ s)?|1 h)$"))
    check(True, f"an event not yet on sale: {page.locator('#sale-state').text_content()!r}")
    width = page.evaluate("() => document.documentElement.scrollWidth")
    check(width <= 390, f"at 390 px, with the longest title picked, the page does not scroll sideways ({width})")
    check(not polled, f"the signed-out tab polled nothing since ({polled[:3]})")
    context.close()
    return now


def organiser_fair_open(browser):
    """A fair open's queue on the page, its draw run from the page, and a request not admitted counted."""
    secret = os.urandom(32).hex()
    # The shuffle takes who queued before the open (entries close then): room for three joins.
    start = datetime.now(timezone.utc) + timedelta(seconds=5)
    event_id = release_event("fair", 2, start, sale_mode="fair_open",
                             draw_commitment=hashlib.sha256(bytes.fromhex(secret)).hexdigest(),
                             queue_opens=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), admission_rate=1)
    queued = [token(f"{RUN}-queued-{i}") for i in range(3)]
    for t in queued:
        status, body = api("POST", f"/events/{event_id}/queue", t)
        check(status == 201, f"a fan joins the fair open's queue ({status} {body})")
    page = watch(browser.new_page(viewport={"width": 1280, "height": 1100}))
    sent = []
    page.on("request", lambda r: sent.append(r.post_data or "") if r.url.endswith("/draw") and r.method == "POST" else None)
    page.goto(f"{args.url}/pages/organiser.html#event={event_id}")
    page.fill("#token", ADMIN)
    page.click("#token-form button[type=submit]")
    expect(page.locator("#entries")).to_be_visible(timeout=15_000)
    expect(page.locator("#entries-title")).to_contain_text("Fair open")
    expect(page.locator("#entered")).to_have_text("3")
    expect(page.locator("#drawn-at")).to_have_text("Not yet")
    pending = page.locator("#checks li[data-check=fair_open_draw]")
    expect(pending).to_have_attribute("data-pending", "true", timeout=15_000)
    expect(pending).to_have_class("pending")
    expect(pending.locator(".badge")).to_have_text("waiting")
    check(True, "the fair open's draw, not drawn yet, is shown waiting, not passed")
    axe(page, "the organiser's page (a fair open before its draw)")

    # A wrong secret: the server's refusal is shown, the field cleared.
    expect(page.locator("#draw-secret")).to_have_attribute("type", "password")
    page.fill("#draw-secret", "ab" * 32)
    page.click("#draw-form button[type=submit]")
    expect(page.locator("#draw-result")).to_contain_text("did not run", timeout=15_000)
    check(page.input_value("#draw-secret") == "", f"a refused draw is shown ({page.locator('#draw-result').text_content()!r}), the field cleared")
    # From the sale's start, the right secret runs it.
    expect(page.locator("#sale-state")).to_have_attribute("data-state", "open", timeout=15_000)
    page.fill("#draw-secret", secret)
    page.click("#draw-form button[type=submit]")
    expect(page.locator("#draw-result")).to_contain_text("Drawn at", timeout=15_000)
    check(page.input_value("#draw-secret") == "", "the draw ran from the page, and the secret field is empty again")
    stores = page.evaluate("() => JSON.stringify([Object.entries(sessionStorage), Object.entries(localStorage)])")
    check(secret not in stores, "the secret is kept in no storage")
    check(sum(secret in body for body in sent) == 1 and all(body.count(secret) <= 1 for body in sent),
          f"the secret went once, in one POST body ({len(sent)} draw requests)")
    expect(page.locator("#drawn-at")).not_to_have_text("Not yet", timeout=15_000)
    expect(page.locator("#admission-rate")).to_have_text("1", timeout=15_000)
    expect(page.locator("#admitted")).to_have_text("3", timeout=30_000)
    expect(page.locator("#all-admitted")).to_have_text(re.compile(r"\d\d:\d\d:\d\d"))
    expect(page.locator("#draw-form")).to_be_hidden()
    check(True, f"the queue's admission is shown ({page.locator('#entries-summary').text_content()!r})")
    # A fan who is not admitted asks for a hash: counted under not admitted.
    status, body = api("GET", f"/events/{event_id}/verify-hash", token(f"{RUN}-not-queued"))
    check(status == 403 and body.get("code") == "NOT_ADMITTED", f"verify-hash without an admission -> NOT_ADMITTED ({status} {body})")
    expect(page.locator("#blocked-not-admitted")).to_have_text("1", timeout=15_000)
    expect(page.locator("#checks li[data-check=fair_open_draw]")).to_have_attribute("data-passed", "true", timeout=15_000)
    expect(page.locator("#checks li[data-check=fair_open_draw]")).not_to_have_attribute("data-pending", "true", timeout=15_000)
    check(True, "the request not admitted is counted; the drawn queue's check passes")
    page.screenshot(path=os.path.join(args.out, "organiser-fair-open.png"), full_page=True)
    axe(page, "the organiser's page (a fair open, drawn)")
    page.close()


def door(browser, event_id):
    # Another event, with one ticket: its pass is genuine, but not this event's.
    other = release("other", 1)
    sale(other, [f"{RUN}-other-fan"])
    drained(other, 1)
    mine = wait_for("the sale's passes in the local mail", lambda: (lambda p: p if len(p) >= 9 else None)(passes(event_id)))
    theirs = list(passes(other))
    check(len(theirs) == 1, "the other event's pass is in the mail")
    (genuine, wedge_a, wedge_b, elsewhere, offline_one, offline_conflict, for_camera,
     by_number, walled) = sorted(mine, key=lambda p: mine[p]["n"])[:9]
    n = {p: mine[p]["n"] for p in mine}

    def checked_in(expected, what):
        status, report = api("GET", f"/admin/events/{event_id}/report", ADMIN)
        check(status == 200 and report["checked_in"] == expected, f"{what} (the server holds {report.get('checked_in')} check-ins)")
        return report

    # Two passes are checked in at another door first (the API directly).
    for p in (elsewhere, offline_conflict):
        status, body = api("POST", f"/admin/events/{event_id}/check-in", STAFF, {"pass": p})
        check(status == 200, f"another door checks ticket {n[p]} in ({status} {body})")

    context = browser.new_context(viewport=DOOR_VIEWPORT)
    page = watch(context.new_page())

    # A fan's token does not set a door up: the pass-key route answers anyone, the check-in route only staff.
    page.goto(f"{args.url}/pages/door.html")
    page.fill("#event", event_id)
    page.fill("#token", token(f"{RUN}-fan-0"))
    page.click("#setup-form button[type=submit]")
    expect(page.locator("#setup-status")).to_contain_text("not staff", timeout=15_000)
    check(page.locator("#scanner").is_hidden(), "a fan's token at setup is refused, and the scanner is not shown")
    door_state(page, "setup refusing a fan's token")

    set_up_door(page, event_id)
    expect(page.locator("#event-title")).to_have_text("Browser test sale")
    expect(page.locator("#event-tickets")).to_have_text("12")
    check(page.locator("#event-checked-in").inner_text().isdigit(), "the heading names the event and counts its check-ins")

    # A pass-key rotation with the door open (simulated: the local runner's keys do not rotate):
    # the device holds only a key from before, and the pass names the new one. Online, it fetches
    # the event's keys again and lets the pass in.
    page.evaluate(f"""() => localStorage.setItem('ticket-grab.door.{event_id}.keys',
        JSON.stringify({{fetched_at: Date.now(), keys: [{{id: 'before-rotation', key: '{OLD_PASS_KEY}'}}]}}))""")
    door_scan(page, genuine, "admitted", "Let in", ticket=n[genuine])
    kept = page.evaluate(f"() => JSON.parse(localStorage.getItem('ticket-grab.door.{event_id}.keys')).keys")
    check("before-rotation" not in [k["id"] for k in kept], f"the door fetched the keys again for a pass naming a new key ({kept})")

    # A keyboard-wedge scanner: a pass and Enter, twice in a row, without waiting for the first verdict.
    seen = len(door_verdicts(page))
    page.focus("#pass")
    for p in (wedge_a, wedge_b):
        page.keyboard.type(p)
        page.keyboard.press("Enter")
    page.wait_for_function("n => window.doorVerdicts.length >= n + 2", arg=seen, timeout=15_000)
    got = [(v["result"], v["ticketNo"]) for v in door_verdicts(page)[seen:]]
    check(got == [("admitted", n[wedge_a]), ("admitted", n[wedge_b])],
          f"a scanner's two passes typed and entered in a row are both let in ({got})")
    check(page.locator("#pass").input_value() == "" and page.evaluate("() => document.activeElement.id") == "pass",
          "the pass field is cleared and keeps the focus")
    page.screenshot(path=os.path.join(args.out, "door-let-in.png"), animations="disabled")
    # The scanner reads the same pass again at once: not a second green (a pass handed back over
    # the barrier would let two in), "Just let in", amber.
    v = door_scan(page, wedge_b, "already", "Just let in", "one person", repeat=True, ticket=n[wedge_b])
    check(v["sound"] and v["vibrated"], f"the verdict sounds and vibrates (sound {v['sound']}, vibration {v['vibrated']})")
    tampered = genuine[:-6] + ("AAAAAA" if not genuine.endswith("AAAAAA") else "BBBBBB")
    door_scan(page, tampered, "refused", "Refused", "forged or altered")
    door_state(page, "a verdict shown", "door-refused.png", full_page=False)
    door_scan(page, theirs[0], "refused", "Refused", "another event")
    door_scan(page, elsewhere, "already", "Already in", "checked in at")
    # Another pass read between: the first pass again is a new scan, and it is already in.
    door_scan(page, genuine, "already", "Already in", "at this door")
    page.screenshot(path=os.path.join(args.out, "door-already.png"), animations="disabled")
    door_dismiss(page)
    report = checked_in(5, f"the server holds five check-ins: two at the other door, tickets {n[genuine]}, {n[wedge_a]}, {n[wedge_b]} here")
    check(report["check_ins_by_door"] == {"Gate A": 3, "(no door named)": 2},
          f"the door set up as Gate A sent its name with each check-in ({report['check_ins_by_door']})")
    expect(page.locator("#scanned-count")).to_have_text("3")

    # The network cut: the page reopens from its service worker and keeps check-ins on the device.
    page.evaluate("() => navigator.serviceWorker.ready.then(() => true)")
    page.wait_for_function("() => navigator.serviceWorker.controller !== null")
    context.set_offline(True)
    page.reload()
    expect(page.locator("#scanner")).to_be_visible(timeout=15_000)
    expect(page.locator("#network")).to_contain_text("Offline")
    expect(page.locator("#event-title")).to_have_text("Browser test sale")
    # Offline, keys two days old still check passes; and the staff token expires meanwhile.
    page.evaluate(f"""() => {{
        const k = 'ticket-grab.door.{event_id}.keys';
        localStorage.setItem(k, JSON.stringify({{...JSON.parse(localStorage.getItem(k)), fetched_at: Date.now() - 2 * 86400e3}}));
        localStorage.setItem('ticket-grab.door.token', '{door_token(f"{RUN}-door", ["staff"], -60)}');
    }}""")
    door_scan(page, offline_one, "admitted", "Let in", "offline", ticket=n[offline_one])
    door_scan(page, offline_conflict, "admitted", "Let in", "offline", ticket=n[offline_conflict])
    door_scan(page, offline_one, "already", "Already in", "at this door")
    door_dismiss(page)
    expect(page.locator("#pending-count")).to_have_text("2")
    door_state(page, "offline, two check-ins kept", "door-offline.png")
    checked_in(5, "nothing reached the server while the door was offline")

    # Back online with the expired token: nothing is dropped; the check-ins wait for a sign-in.
    context.set_offline(False)
    expect(page.locator("#pending-state")).to_contain_text("waiting for sign-in", timeout=30_000)
    expect(page.locator("#sign-in")).to_be_visible()
    expect(page.locator("#pending-count")).to_have_text("2")
    expect(page.locator("#pending tr")).to_have_count(2)
    checked_in(5, "a sync refused for its expired token records nothing, and the door keeps both check-ins")
    door_state(page, "check-ins waiting for a sign-in", "door-sign-in.png")
    page.fill("#sign-in-token", token(f"{RUN}-fan-1"))
    page.click("#sign-in-form button[type=submit]")
    expect(page.locator("#sign-in-status")).to_contain_text("not staff", timeout=15_000)
    expect(page.locator("#pending-count")).to_have_text("2")
    # Signing in again on the scanner sends them.
    page.fill("#sign-in-token", STAFF)
    page.click("#sign-in-form button[type=submit]")
    expect(page.locator("#pending-count")).to_have_text("0", timeout=30_000)
    expect(page.locator("#sign-in")).to_be_hidden()
    expect(page.locator("#conflicts tr")).to_have_count(1)
    expect(page.locator("#conflict-alert")).to_contain_text("1 pass let in here offline")
    expect(page.locator("#conflicts")).to_contain_text(str(n[offline_conflict]))
    expect(page.locator("#conflicts")).to_contain_text("another door had checked this ticket in")
    report = checked_in(6, "signed in again on the scanner, the offline check-in reached the server")
    check(report["check_in_conflicts"] == 1, f"the audit counts the pass let in at two doors ({report['check_in_conflicts']})")
    _, orders = api("GET", f"/admin/events/{event_id}/orders?limit=500", ADMIN)
    held = {o["order_id"]: o for o in orders["orders"]}
    kept = page.evaluate(f"() => JSON.parse(localStorage.getItem('ticket-grab.door.{event_id}.scans'))")
    offline_at = kept[mine[offline_one]["o"]]["at"]
    server_at = held[mine[offline_one]["o"]]["checked_in_at"]
    check(abs(datetime.fromisoformat(server_at.replace("Z", "+00:00")).timestamp()
              - datetime.fromisoformat(offline_at.replace("Z", "+00:00")).timestamp()) < 0.001,
          f"the server holds the offline check-in at the time the door let it in ({server_at} = {offline_at})")
    check(held[mine[offline_conflict]["o"]]["check_in_conflicts"] == 1, "the conflict is recorded on its order")
    page.wait_for_function(f"""() => Date.now() - JSON.parse(localStorage.getItem('ticket-grab.door.{event_id}.keys')).fetched_at < 60000""",
                           timeout=30_000)
    check(True, "keys older than a day, used offline, are fetched again online")
    door_state(page, "synced, a conflict shown", "door-synced.png")
    door_side_by_side(browser, ["door-let-in.png", "door-synced.png"], "door.png")

    # A 403 that is not the API's (the edge's firewall blocking the venue's address for a while):
    # the scan is kept and sent again, never taken for a refused sign-in; once the block lifts, it
    # reaches the server.
    before = api("GET", f"/admin/events/{event_id}/report", ADMIN)[1]["checked_in"]
    def firewall(route):
        route.fulfill(status=403, body="Forbidden", content_type="text/plain")
    page.route("**/check-in", firewall)
    door_scan(page, walled, "admitted", "Let in", "busy", ticket=n[walled])
    door_dismiss(page)
    expect(page.locator("#sign-in")).to_be_hidden()
    expect(page.locator("#pending-count")).to_have_text("1")
    page.unroute("**/check-in", firewall)
    expect(page.locator("#pending-count")).to_have_text("0", timeout=30_000)
    checked_in(before + 1, f"ticket {n[walled]}, kept through a firewall's 403, reached the server")

    # A holder whose phone died: looked up by ticket number, let in by it.
    page.fill("#lookup", str(n[by_number]))
    page.press("#lookup", "Enter")
    expect(page.locator("#lookup-result")).to_be_visible(timeout=15_000)
    expect(page.locator("#holder-status")).to_have_text("Confirmed")
    expect(page.locator("#holder-checked-in")).to_have_text("not yet")
    check("@" in page.locator("#holder-email").inner_text(), "the lookup shows the holder's (masked) address")
    door_state(page, "a holder looked up", "door-lookup.png")
    # Anyone can say a number: staff are shown whose it is (masked address, order) and confirm.
    page.click("#let-in")
    expect(page.locator("#let-in-confirm")).to_be_visible()
    ask = page.locator("#let-in-ask").inner_text()
    check(mine[by_number]["o"] in ask and "@" in ask and "Ask the person" in ask,
          f"a let-in by number shows the holder's masked address and order and asks staff to confirm ({ask!r})")
    checked_in(7, "nothing is let in before staff confirm the holder")
    door_state(page, "a let-in by number to confirm")
    page.click("#let-in-yes")
    page.wait_for_function("() => window.doorVerdicts.at(-1).ticketNo === %d && window.doorVerdicts.at(-1).headline === 'Let in'" % n[by_number],
                           timeout=15_000)
    checked_in(8, f"ticket {n[by_number]}, let in by number after a lookup, is checked in")
    door_dismiss(page)
    # By order id: a holder already in has no "Let in".
    page.fill("#lookup", mine[elsewhere]["o"])
    page.press("#lookup", "Enter")
    expect(page.locator("#holder-checked-in")).to_contain_text("yes, at", timeout=15_000)
    expect(page.locator("#let-in")).to_be_hidden()
    page.fill("#lookup", "99999")
    page.press("#lookup", "Enter")
    expect(page.locator("#lookup-status")).to_contain_text("No ticket or order", timeout=15_000)
    expect(page.locator("#lookup-result")).to_be_hidden()

    # Another event: the last verdict goes with the event.
    page.click("#leave")
    expect(page.locator("#setup")).to_be_visible()
    page.fill("#event", event_id)
    page.click("#setup-form button[type=submit]")
    expect(page.locator("#scanner")).to_be_visible(timeout=15_000)
    expect(page.locator("#last-verdict")).to_have_text("nothing checked yet")
    check(page.locator("#verdict").is_hidden() and page.locator("#verdict").get_attribute("data-result") is None,
          "a change of event clears the last verdict")
    context.close()
    return for_camera, n[for_camera]


def door_faults(browser):
    """Where the door let the wrong person in: a forged pass, an expired sign-in, hanging Wi-Fi, a
    checkbox that ate the next scans, a repeat read, a switch of event with check-ins unsent."""
    event_id = release("door-faults", 16)
    sale(event_id, [f"{RUN}-df-{i}" for i in range(16)])
    drained(event_id, 16)
    mine = wait_for("the door-faults sale's passes", lambda: (lambda p: p if len(p) >= 16 else None)(passes(event_id)))
    (held, elsewhere, fresh, hang_a, hang_b, hang_c, hang_d, boxed, switched, gated,
     stale_a, stale_b, stale_c, no_ed, no_ed_offline, *_) = sorted(mine, key=lambda p: mine[p]["n"])
    n = {p: mine[p]["n"] for p in mine}
    in_a = {p: mine[p]["o"] for p in mine}

    def server_checked_in():
        return api("GET", f"/admin/events/{event_id}/report", ADMIN)[1]["checked_in"]

    # Another door (named Gate B) checks two passes in first.
    for p in (elsewhere, gated):
        status, body = api("POST", f"/admin/events/{event_id}/check-in", STAFF, {"pass": p, "door": "Gate B"})
        check(status == 200, f"Gate B checks ticket {n[p]} in ({status} {body})")
    context = browser.new_context(viewport=DOOR_VIEWPORT)
    page = watch(context.new_page())
    set_up_door(page, event_id, "Gate C")

    with case("a forged pass"):
        # 1. A forged pass naming a key nobody published, copying a real holder's order and number:
        # the device cannot verify it, so the server decides (BAD_PASS, red); offline it is amber,
        # with no number shown and nothing to let in; the real holder then gets in.
        claims = {"k": "deadbeefdeadbeef", "e": event_id, "o": in_a[held], "n": n[held]}
        forged = f"TP2.{b64url(json.dumps(claims).encode())}.{b64url(os.urandom(64))}"
        v = door_scan(page, forged, "refused", "Refused", "server does not know")
        check(v["ticketNo"] is None, f"a forged pass's claimed ticket number is not shown as its ticket ({v['ticketNo']})")
        door_dismiss(page)
        # (Something else read between: the forged pass again is a new scan, not a repeat.)
        door_scan(page, "not-a-pass", "refused", "Refused", "not a ticket pass")
        context.set_offline(True)
        v = door_scan(page, forged, "notice", "Cannot check", "cannot be asked")
        check(v["ticketNo"] is None and "look" not in v["detail"],
              f"offline, a pass the device cannot verify is amber, no number, no lookup offered ({v['detail']!r})")
        door_dismiss(page)
        context.set_offline(False)
        page.wait_for_function("() => navigator.onLine")
        before = server_checked_in()
        door_scan(page, held, "admitted", "Let in", ticket=n[held])
        door_dismiss(page)
        check(server_checked_in() == before + 1, f"the real holder of ticket {n[held]} gets in after the forgery was refused")

    with case("Already in names the door"):
        # 2. "Already in" names the door that let the pass in.
        door_scan(page, elsewhere, "already", "Already in", "Gate B")
        door_dismiss(page)

    with case("the same pass again within 2 s"):
        # 3. The same pass read again within 2 s: "Just let in", amber, never a second green.
        door_scan(page, fresh, "admitted", "Let in", ticket=n[fresh])
        door_scan(page, fresh, "already", "Just let in", "one person", repeat=True, ticket=n[fresh])
        door_dismiss(page)

    with case("the sign-in ending and ended"):
        # 4. The sign-in ends: online, the door cannot tell a pass another door took from one nobody
        # did, so nothing it has not let in itself is green; staff are told before the end.
        page.evaluate(f"() => localStorage.setItem('ticket-grab.door.token', '{door_token(f'{RUN}-door', ['staff'], 600)}')")
        page.reload()
        expect(page.locator("#sign-in-ends")).to_contain_text("ends at", timeout=15_000)
        expect(page.locator("#sign-in")).to_be_visible()
        door_state(page, "its sign-in ending in 10 minutes", "door-sign-in-ends.png")
        page.evaluate(f"() => localStorage.setItem('ticket-grab.door.token', '{door_token(f'{RUN}-door', ['staff'], -60)}')")
        before = server_checked_in()
        v = door_scan(page, gated, "notice", "Cannot check", "sign-in has ended")
        door_dismiss(page)
        door_scan(page, boxed, "notice", "Cannot check", "sign-in has ended", ticket=n[boxed])
        door_dismiss(page)
        check(server_checked_in() == before and page.locator("#pending-count").inner_text() == "0",
              "with its sign-in ended, a pass checked in at another door and a new one are amber, nothing kept or sent")
        expect(page.locator("#sign-in")).to_be_visible()
        page.fill("#sign-in-token", STAFF)
        page.click("#sign-in-form button[type=submit]")
        expect(page.locator("#sign-in")).to_be_hidden(timeout=15_000)

    with case("the tone's checkbox"):
        # 5. The checkbox: a tap on "A tone with each verdict", then the scanner types the next pass.
        page.click("#sound")
        seen = len(door_verdicts(page))
        page.keyboard.type(boxed)
        page.keyboard.press("Enter")
        page.wait_for_function("n => window.doorVerdicts.length > n", arg=seen, timeout=15_000)
        got = door_verdicts(page)[seen]
        check(got["result"] == "admitted" and got["ticketNo"] == n[boxed],
              f"a scan typed after a tap on the tone's checkbox reaches the pass field ({got['headline']}, {got['detail']!r})")
        page.click("#verdict")
        page.click("#sound")

    with case("the network hanging"):
        # 6. Wi-Fi connected but not answering: each verdict within ~1 s of its Enter, four in a burst.
        hung = []
        page.route("**/check-in", lambda route: hung.append(route))
        verdicts, waits = door_burst(page, (hang_a, hang_b, hang_c, hang_d))
        check(all(v["result"] == "admitted" and "offline" in v["detail"] for v in verdicts) and max(waits) < 1.5,
              f"with the network hanging, four scans in a burst are let in on the device, each within 1.5 s of its Enter ({waits} s)")
        expect(page.locator("#network")).to_contain_text("does not answer")
        expect(page.locator("#pending-count")).to_have_text("4")
        page.unroute("**/check-in")
        for route in hung:
            try:
                route.abort()
            except Exception:
                pass  # the page gave up on it already
        expect(page.locator("#pending-count")).to_have_text("0", timeout=30_000)
        check(True, "the four check-ins kept while the network hung reach the server once it answers")
        door_dismiss(page)

    with case("keys a day old while the network hangs"):
        # Keys older than a day are fetched again in the background, never in a verdict's way.
        page.evaluate(f"""() => {{
            const k = 'ticket-grab.door.{event_id}.keys';
            localStorage.setItem(k, JSON.stringify({{...JSON.parse(localStorage.getItem(k)), fetched_at: Date.now() - 2 * 86400e3}}));
        }}""")
        hung = []
        page.route("**/pass-key", lambda route: hung.append(route))
        page.route("**/check-in", lambda route: hung.append(route))
        verdicts, waits = door_burst(page, (stale_a, stale_b, stale_c))
        check(all(v["result"] == "admitted" for v in verdicts) and max(waits) < 1.5,
              f"with day-old keys and the network hanging, each verdict within 1.5 s of its Enter ({waits} s)")
        page.unroute("**/pass-key")
        page.unroute("**/check-in")
        expect(page.locator("#pending-count")).to_have_text("0", timeout=30_000)
        door_dismiss(page)

    with case("a browser that cannot check Ed25519"):
        # (Before Chrome 137, Safari 17, Firefox 129.) Not "forged" on its word: online the server
        # decides, offline amber.
        old = context.new_page()
        old.add_init_script("""(() => {
            const importKey = crypto.subtle.importKey.bind(crypto.subtle);
            crypto.subtle.importKey = (format, data, algorithm, ...rest) =>
                (algorithm === 'Ed25519' || algorithm?.name === 'Ed25519')
                    ? Promise.reject(new DOMException('Unrecognized name', 'NotSupportedError'))
                    : importKey(format, data, algorithm, ...rest);
        })()""")
        old.goto(f"{args.url}/pages/door.html")
        expect(old.locator("#scanner")).to_be_visible(timeout=15_000)
        door_scan(old, no_ed, "admitted", "Let in", ticket=n[no_ed])
        door_dismiss(old)
        context.set_offline(True)
        door_scan(old, no_ed_offline, "notice", "Cannot check", "cannot be asked")
        context.set_offline(False)
        old.close()

    with case("the event switched with check-ins unsent"):
        # 7. Check-ins made offline for this event, then the door switched to another event before
        # they were sent, its sign-in for this one ended: signing in with this event's staff token
        # from the other event's scanner sends them.
        context.set_offline(True)
        door_scan(page, switched, "admitted", "Let in", "offline", ticket=n[switched])
        door_dismiss(page)
        page.evaluate(f"() => localStorage.setItem('ticket-grab.door.token', '{door_token(f'{RUN}-door', ['staff'], -60)}')")
        page.click("#leave")
        context.set_offline(False)
        other = release("door-switch", 1)
        set_up_door(page, other, "Gate C", token(f"{RUN}-door-b", groups=[f"staff-{other}"]))
        expect(page.locator("#sign-in")).to_be_visible(timeout=30_000)
        expect(page.locator("#sign-in-why")).to_contain_text(event_id)
        page.fill("#sign-in-token", token(f"{RUN}-door-a", groups=[f"staff-{event_id}"]))
        page.click("#sign-in-form button[type=submit]")
        expect(page.locator("#sign-in-status")).to_contain_text(f"Signed in for {event_id}", timeout=15_000)
        page.wait_for_function(f"""() => !Object.values(JSON.parse(localStorage.getItem('ticket-grab.door.{event_id}.scans') || '{{}}')).some((s) => !s.synced)""",
                               timeout=30_000)
        _, orders = api("GET", f"/admin/events/{event_id}/orders?limit=500", ADMIN)
        got = {o["order_id"]: o for o in orders["orders"]}
        check(got[in_a[switched]].get("checked_in_at"),
              f"ticket {n[switched]}, let in offline before the door switched events, reached the server with a token of its event's staff")
    context.close()


class StandInUserPool:
    """The user pool's hosted UI and token endpoint as the door meets them (OAuth's code flow with
    PKCE, a refresh token), stood in for in the browser: there is no Cognito here. It answers as
    Cognito documents, checks what the page sends (the state, the verifier against the
    challenge), and issues development tokens the runner takes, each living `lifetime_s`."""

    ORIGIN = "https://auth.example.test"

    def __init__(self, lifetimes, ahead_s=lambda: 0):
        self.lifetimes = list(lifetimes)  # one per token issued, in order
        self.ahead_s = ahead_s  # how far the page's clock runs ahead of this one
        self.challenge = None
        self.code = None
        self.issued = []  # (grant_type, exp)
        self.refresh_token = b64url(os.urandom(24))
        self.revoked = False  # a global sign-out: the refresh token renews nothing more

    def attach(self, context):
        context.route("**/pages/config.json", lambda route: route.fulfill(
            json={"cognito": {"hosted_ui": self.ORIGIN, "client_id": "browser-door"}}))
        context.route(f"{self.ORIGIN}/**", self.answer)

    def token(self):
        lifetime = self.lifetimes.pop(0) if len(self.lifetimes) > 1 else self.lifetimes[0]
        return door_token(f"{RUN}-door", ["staff"], int(self.ahead_s()) + lifetime)

    def answer(self, route):
        request = route.request
        url = urllib.parse.urlparse(request.url)
        cors = {"access-control-allow-origin": args.url, "access-control-allow-headers": "content-type"}
        if request.method == "OPTIONS":
            return route.fulfill(status=204, headers={**cors, "access-control-allow-methods": "POST"})
        if url.path == "/oauth2/authorize":
            q = dict(urllib.parse.parse_qsl(url.query))
            ok = q.get("response_type") == "code" and q.get("code_challenge_method") == "S256" and q.get("code_challenge")
            if not ok:
                return route.fulfill(status=400, body="the door must ask for a code with PKCE")
            self.challenge, self.code = q["code_challenge"], b64url(os.urandom(16))
            back = f"{q['redirect_uri']}?{urllib.parse.urlencode({'code': self.code, 'state': q['state']})}"
            return route.fulfill(status=302, headers={"location": back})
        if url.path == "/oauth2/token" and request.method == "POST":
            form = dict(urllib.parse.parse_qsl(request.post_data or ""))
            grant = form.get("grant_type")
            if grant == "authorization_code":
                proof = b64url(hashlib.sha256(form.get("code_verifier", "").encode()).digest())
                if form.get("code") != self.code or proof != self.challenge:
                    return route.fulfill(status=400, headers=cors, json={"error": "invalid_grant"})
                self.code = None  # a code is good once
                reply = {"refresh_token": self.refresh_token}
            elif grant == "refresh_token" and form.get("refresh_token") == self.refresh_token and not self.revoked:
                reply = {}
            else:
                return route.fulfill(status=400, headers=cors, json={"error": "invalid_grant"})
            issued = self.token()
            self.issued.append((grant, json.loads(base64.urlsafe_b64decode(issued.split(".")[1] + "=="))["exp"]))
            return route.fulfill(headers=cors, json={**reply, "id_token": issued, "access_token": "unused",
                                                     "token_type": "Bearer", "expires_in": 3600})
        return route.fulfill(status=404, body="")


def door_renewal(browser, event_id):
    """A door signed in through the user pool renews its sign-in before it ends, nobody typing."""
    pool = StandInUserPool([600, 3600])  # the first sign-in ends within the warning's 15 minutes
    # The stand-in is reached through Playwright's routes, after the page's CSP: the CSP's
    # connect-src naming the token endpoint is the pages crate's own test.
    context = browser.new_context(viewport=DOOR_VIEWPORT, bypass_csp=True)
    pool.attach(context)
    page = context.new_page()
    page.goto(f"{args.url}/pages/door.html")
    page.fill("#event", event_id)
    expect(page.locator("#hosted-ui")).to_be_visible(timeout=15_000)
    page.click("#hosted-ui")
    page.wait_for_url(re.compile(r".*/pages/door\.html$"), timeout=15_000)
    page.wait_for_function("() => localStorage.getItem('ticket-grab.door.token') !== null", timeout=15_000)
    check(pool.issued[:1] and pool.issued[0][0] == "authorization_code" and "code=" not in page.url,
          f"the hosted sign-in's code, with this tab's state and verifier, is exchanged for tokens and leaves the address ({pool.issued})")
    page.fill("#event", event_id)
    page.click("#setup-form button[type=submit]")
    expect(page.locator("#scanner")).to_be_visible(timeout=15_000)
    page.wait_for_function("() => JSON.parse(atob(localStorage.getItem('ticket-grab.door.token').split('.')[1].replace(/-/g, '+').replace(/_/g, '/'))).exp * 1000 - Date.now() > 30 * 60 * 1000",
                           timeout=30_000)
    check([g for g, _ in pool.issued] == ["authorization_code", "refresh_token"],
          f"ten minutes from its end, the door renewed its sign-in with the refresh token, nobody typing ({pool.issued})")
    expect(page.locator("#sign-in")).to_be_hidden()
    expect(page.locator("#sign-in-ends")).to_be_hidden()
    context.close()


def door_shift(browser):
    """A night at the door: 3 hours on the page's clock, 300 passes at a wedge scanner's speed,
    through a network outage, a key rotation, a sign-in renewed and one that ended (its refresh
    revoked), another door taking passes meanwhile. Every pass let in here is on the server at the
    end; no pass another door or this one took is ever green here."""
    event_id = release("door-shift", 300)
    sale(event_id, [f"{RUN}-night-{i}" for i in range(300)])
    drained(event_id, 300)
    mine = wait_for("the night's 300 passes", lambda: (lambda p: p if len(p) >= 300 else None)(passes(event_id)))
    queue = sorted(mine, key=lambda p: mine[p]["n"])
    n = {p: mine[p]["n"] for p in mine}
    # Another door (Gate Z) takes every fifteenth pass during the night, before it reaches this one.
    elsewhere = set(queue[7::15])
    taken = set()
    ahead = {"s": 0}
    pool = StandInUserPool([3600], ahead_s=lambda: ahead["s"])
    context = browser.new_context(viewport=DOOR_VIEWPORT, bypass_csp=True)
    pool.attach(context)
    context.clock.install(time=time.time())
    page = context.new_page()

    def renewals(n, what):
        """Waits for the stand-in to have issued `n` tokens, the page's requests dispatched meanwhile
        (Playwright's sync API runs route handlers only while it is called: a bare sleep would
        leave the renewal's request unanswered)."""
        deadline = time.time() + PATIENCE_S
        while len(pool.issued) < n:
            if time.time() > deadline:
                fail(f"{what}: not within {PATIENCE_S} s ({pool.issued})")
            page.wait_for_timeout(250)

    def forward(minutes):
        # Said first: a renewal the jump sets off is issued for the page's new time.
        ahead["s"] += minutes * 60
        page.clock.fast_forward(minutes * 60_000)

    def scan_all(batch, expect_amber=False):
        """The scanner sends each pass and Enter back to back; returns the batch's verdicts."""
        seen = len(door_verdicts(page))
        page.focus("#pass")
        for p in batch:
            if p in elsewhere and p not in taken:
                status, body = api("POST", f"/admin/events/{event_id}/check-in", STAFF, {"pass": p, "door": "Gate Z"})
                if status != 200:
                    fail(f"Gate Z could not check ticket {n[p]} in first ({status} {body})")
                taken.add(p)
            page.keyboard.insert_text(p)
            page.keyboard.press("Enter")
        page.wait_for_function("n => window.doorVerdicts.length >= n", arg=seen + len(batch), timeout=120_000)
        return list(zip(batch, door_verdicts(page)[seen:seen + len(batch)]))

    verdicts = []
    # Doors open: signed in through the user pool (a code, then tokens and a refresh token).
    page.goto(f"{args.url}/pages/door.html")
    page.fill("#event", event_id)
    expect(page.locator("#hosted-ui")).to_be_visible(timeout=15_000)
    page.click("#hosted-ui")
    page.wait_for_function("() => localStorage.getItem('ticket-grab.door.token') !== null", timeout=15_000)
    page.fill("#event", event_id)
    page.fill("#door-name", "Night door")
    page.click("#setup-form button[type=submit]")
    expect(page.locator("#scanner")).to_be_visible(timeout=15_000)

    # 19:00, the Wi-Fi drops for the first wave: checked here and kept.
    context.set_offline(True)
    offline_wave = [p for p in queue[:40] if p not in elsewhere][:30]
    verdicts += scan_all(offline_wave)
    context.set_offline(False)
    expect(page.locator("#pending-count")).to_have_text("0", timeout=60_000)
    check(True, "the 30 passes let in during the outage reached the server once it was back")
    rest = [p for p in queue if p not in offline_wave]

    # 19:46: the sign-in would end within 15 minutes; the door renews it, nobody typing.
    forward(46)
    renewals(2, "the first renewal")
    verdicts += scan_all(rest[:60])

    # 20:10: the pass keys rotate (this device holds only the key from before).
    forward(24)
    page.evaluate(f"""() => localStorage.setItem('ticket-grab.door.{event_id}.keys',
        JSON.stringify({{fetched_at: Date.now(), keys: [{{id: 'before-rotation', key: '{OLD_PASS_KEY}'}}]}}))""")
    verdicts += scan_all(rest[60:120])

    # 20:40: renewed again; then the user pool signs the door out everywhere (its refresh revoked).
    forward(30)
    renewals(3, "the second renewal")
    verdicts += scan_all(rest[120:180])
    pool.revoked = True
    # 21:32: the sign-in ends within 15 minutes and cannot be renewed: staff are warned ...
    forward(52)
    expect(page.locator("#sign-in-ends")).to_contain_text("ends at", timeout=15_000)
    # ... and do not act until it has ended: the next passes are amber, none let in.
    forward(16)
    expect(page.locator("#sign-in-ends")).to_contain_text("has ended", timeout=15_000)
    amber = scan_all(rest[180:200])
    check(all(v["result"] == "notice" for _, v in amber), f"after the sign-in ended, 20 passes are amber ({[v['result'] for _, v in amber][:5]} ...)")
    # Staff sign in again (a token pasted); the amber ones are scanned again, and the rest.
    page.fill("#sign-in-token", door_token(f"{RUN}-door", ["staff"], ahead["s"] + 3600))
    page.click("#sign-in-form button[type=submit]")
    expect(page.locator("#sign-in")).to_be_hidden(timeout=15_000)
    verdicts += scan_all(rest[180:])
    forward(12)  # 22:00: doors close
    expect(page.locator("#pending-count")).to_have_text("0", timeout=60_000)

    let_in = {p for p, v in verdicts if v["result"] == "admitted"}
    wrong = [(n[p], v["headline"]) for p, v in verdicts if v["result"] == "admitted" and p in elsewhere]
    check(not wrong, f"no pass another door took is green here ({len(wrong)} wrong greens: {wrong[:5]})")
    check(let_in == set(queue) - elsewhere,
          f"every other pass of the 300 was let in here once ({len(let_in)} let in, {len(set(queue) - elsewhere)} expected)")
    report = api("GET", f"/admin/events/{event_id}/report", ADMIN)[1]
    check(report["checked_in"] == 300 and report["check_ins_by_door"].get("Night door") == len(let_in)
          and report.get("check_in_conflicts", 0) == 0,
          f"every check-in of the night is on the server: {report['checked_in']} of 300, {report['check_ins_by_door']}, "
          f"{report.get('check_in_conflicts')} conflicts")
    check([g for g, _ in pool.issued] == ["authorization_code", "refresh_token", "refresh_token"],
          f"three hours on two renewals and one sign-in again by hand ({[g for g, _ in pool.issued]})")
    context.close()


def set_up_door(page, event_id, door_name="Gate A", tok=None):
    """Opens the door's page and sets it up for the event with a staff token, as door `door_name`."""
    page.goto(f"{args.url}/pages/door.html")
    page.fill("#event", event_id)
    page.fill("#door-name", door_name)
    page.fill("#token", tok or STAFF)
    page.click("#setup-form button[type=submit]")
    expect(page.locator("#scanner")).to_be_visible(timeout=15_000)


# The door's test helpers (door(), set_up_door() and camera() use them).

def door_token(sub, groups=(), lifetime_s=3600):
    """A development token like token()'s, living `lifetime_s` (negative: expired that long ago)."""
    now = int(time.time())
    claims = {"sub": sub, "exp": now + lifetime_s, "iat": min(now, now + lifetime_s - 60),
              "email": f"{sub}@example.com", "email_verified": True}
    if groups:
        claims["cognito:groups"] = list(groups)
    head = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64url(json.dumps(claims).encode())
    sig = hmac.new(args.jwt_secret.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64url(sig)}"


# The door is a phone's page: every state is checked at a phone's width.
DOOR_VIEWPORT = {"width": 390, "height": 844}
# A valid Ed25519 public key (the curve's base point) that signed no pass: a key from before a rotation.
OLD_PASS_KEY = b64url(bytes.fromhex("58" + "66" * 31))


def door_verdicts(page):
    return page.evaluate("() => window.doorVerdicts")


def door_burst(page, burst):
    """A scanner's burst: each pass typed and entered without waiting. Its verdicts, and how long
    each took from its Enter (s)."""
    seen, scans = len(door_verdicts(page)), page.evaluate("() => window.doorScans.length")
    page.focus("#pass")
    for p in burst:
        page.keyboard.type(p)
        page.keyboard.press("Enter")
    page.wait_for_function("n => window.doorVerdicts.length >= n", arg=seen + len(burst), timeout=15_000)
    verdicts = door_verdicts(page)[seen:seen + len(burst)]
    entered = page.evaluate("() => window.doorScans")[scans:scans + len(burst)]
    return verdicts, [round((v["at"] - e["at"]) / 1000, 2) for v, e in zip(verdicts, entered)]


def door_state(page, name, shot=None, full_page=True):
    """One state of the door's page: no horizontal scroll at 390 px, axe-core clean, a screenshot."""
    width = page.evaluate("() => document.documentElement.scrollWidth")
    check(width <= DOOR_VIEWPORT["width"], f"the door, {name}: no horizontal scroll at 390 px ({width} px wide)")
    if shot:
        page.screenshot(path=os.path.join(args.out, shot), full_page=full_page, animations="disabled")
    axe(page, f"the door's page, {name}")


def door_side_by_side(browser, shots, name):
    """Screenshots of the door side by side in one picture (the main one: a verdict, and the scanner)."""
    pictures = "".join(f'<img alt="" src="data:image/png;base64,{base64.b64encode(open(os.path.join(args.out, s), "rb").read()).decode()}">'
                       for s in shots)
    page = browser.new_page(viewport={"width": len(shots) * (DOOR_VIEWPORT["width"] + 16) + 16, "height": DOOR_VIEWPORT["height"]})
    page.set_content(f'<body style="margin:0;padding:16px;display:flex;gap:16px;align-items:flex-start;background:#d0d5dd">{pictures}</body>')
    page.screenshot(path=os.path.join(args.out, name), full_page=True)
    page.close()


def door_dismiss(page):
    """Taps the verdict away (it covers the screen) before a button under it is used."""
    verdict = page.locator("#verdict")
    if verdict.is_visible():
        verdict.click()
    expect(verdict).to_be_hidden()


def door_scan(page, p, expected, headline, detail=None, repeat=False, ticket=None):
    """Scans `p` (the pass in the field, then Enter) and checks the verdict it gets."""
    seen = len(door_verdicts(page))
    page.fill("#pass", p)
    page.press("#pass", "Enter")
    page.wait_for_function("n => window.doorVerdicts.length > n", arg=seen, timeout=15_000)
    v = door_verdicts(page)[seen]
    ok = (v["result"] == expected and v["headline"] == headline and (detail is None or detail in v["detail"])
          and v["repeat"] == repeat and (ticket is None or v["ticketNo"] == ticket))
    check(ok, f"the door says {headline!r} ({expected}{', repeated' if repeat else ''}"
              f"{f', {detail!r}' if detail else ''}): {v['headline']!r} ({v['result']}, {v['detail']!r})")
    expect(page.locator("#verdict")).to_have_attribute("data-result", expected)
    expect(page.locator("#verdict-text")).to_have_text(headline)
    return v


def qr_video(text, path, width=640, height=480):
    """A Y4M video (what Chromium's fake camera plays) of `text`'s QR code, black on white."""
    matrix = [list(row) for row in segno.make(text, error="m").matrix]
    quiet = 4
    size = len(matrix) + 2 * quiet
    scale = min(width, height) // size
    luma = bytearray([235]) * (width * height)
    left, top = (width - size * scale) // 2, (height - size * scale) // 2
    for y, row in enumerate(matrix):
        for x, dark in enumerate(row):
            if dark:
                for dy in range(scale):
                    start = (top + (y + quiet) * scale + dy) * width + left + (x + quiet) * scale
                    luma[start:start + scale] = bytes([16]) * scale
    chroma = bytes([128]) * (width * height // 4)
    with open(path, "wb") as f:
        f.write(f"YUV4MPEG2 W{width} H{height} F10:1 Ip A1:1 C420jpeg\n".encode())
        for _ in range(10):
            f.write(b"FRAME\n" + bytes(luma) + chroma + chroma)


def camera(p, event_id, pass_text, ticket_no):
    video = os.path.join(args.out, "pass.y4m")
    qr_video(pass_text, video)
    order = json.loads(base64.urlsafe_b64decode(pass_text.split(".")[1] + "=="))["o"]
    browser = launch(p, ["--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
                         f"--use-file-for-fake-video-capture={video}"])
    context = browser.new_context(permissions=["camera"], viewport=DOOR_VIEWPORT)
    page = watch(context.new_page())
    set_up_door(page, event_id)
    page.click("#camera-button")
    expect(page.locator("#camera-box")).to_be_visible(timeout=15_000)
    preview, field = page.locator("#camera-box").bounding_box(), page.locator("#pass-form").bounding_box()
    check(preview["y"] + preview["height"] <= field["y"], "the camera's preview sits above the pass field and the buttons")
    expect(page.locator("#verdict")).to_have_attribute("data-result", "admitted", timeout=30_000)
    expect(page.locator("#verdict-ticket")).to_have_text(f"Ticket {ticket_no}")
    # The pass stays in front of the camera: five seconds of reads after the verdict, still one "Let in".
    first = page.evaluate("() => window.doorVerdicts[0].at")
    page.wait_for_function("t => window.doorCamera.lastReadAt - t >= 5000", arg=first, timeout=30_000)
    shown = [(v["result"], v["headline"]) for v in door_verdicts(page)]
    reads = page.evaluate("() => window.doorCamera.reads")
    check(shown and all(s == ("admitted", "Let in") for s in shown),
          f"the camera reading the pass just let in for 5 s more ({reads} reads) never contradicts its verdict ({shown})")
    door_dismiss(page)
    page.click("#camera-stop")
    expect(page.locator("#camera-box")).to_be_hidden()
    check(page.evaluate("() => document.getElementById('camera').srcObject === null"), "the stop button stops the camera")
    _, orders = api("GET", f"/admin/events/{event_id}/orders?limit=500", ADMIN)
    held = {o["order_id"]: o for o in orders["orders"]}
    native = page.evaluate("async () => 'BarcodeDetector' in window && (await BarcodeDetector.getSupportedFormats()).includes('qr_code')")
    check(held[order].get("checked_in_at"), f"the camera read ticket {ticket_no}'s QR code ({'BarcodeDetector' if native else 'jsQR'}) "
                                            f"and checked it in")
    check(page.locator("#wake-lock").inner_text() != "", f"the scanner asks to keep the screen on ({page.locator('#wake-lock').inner_text()})")
    browser.close()


# drand's quicknet (shared/domain/src/beacon.rs): a ballot may name one of its rounds, not yet signed.
QUICKNET_KEY = ("83cf0f2896adee7eb8b5f01fcad3912212c437e0073e911fb90022d3e760183c8c4b450b6a0a6c3ac6a5776a2d1064510d1fec758c921cc22b0e17e"
                "63aaf4bcb5ed66304de9cf809bd274ca73bab4af5a6e9c76a4bc09e76eae8991ef5ece45a")


def organiser_ballot(browser):
    """A ballot naming a beacon round: its entries, a grab at it counted under ballot only, and the
    draw's form asking for the round's signature (a wrong one: the server's refusal shown)."""
    secret = os.urandom(32).hex()
    # Entries close at sale_start, in a few seconds; the release names quicknet's first round after.
    start = datetime.now(timezone.utc) + timedelta(seconds=5)
    event_id = release_event("ballot", 1, start, sale_mode="ballot",
                             draw_commitment=hashlib.sha256(bytes.fromhex(secret)).hexdigest(),
                             draw_beacon={"public_key": QUICKNET_KEY})
    _, released = api("GET", f"/events/{event_id}", ADMIN)
    round_no = released["draw"]["beacon"]["round"]
    for i in range(2):
        status, body = api("POST", f"/events/{event_id}/entry", token(f"{RUN}-entrant-{i}"))
        check(status == 201, f"a fan enters the ballot ({status} {body})")
    # From sale_start (whole seconds) a grab gets a hash, and is told the ballot hands out nothing.
    time.sleep(max(0.0, start.replace(microsecond=0).timestamp() + 1 - time.time()))
    grabber = token(f"{RUN}-ballot-grabber")
    _, hashed = api("GET", f"/events/{event_id}/verify-hash", grabber)
    status, body = api("POST", f"/events/{event_id}/grab", grabber, {"hash": hashed.get("hash", "")})
    check(status == 409 and body.get("code") == "BALLOT_ONLY", f"a grab at a ballot -> BALLOT_ONLY ({status} {body})")
    page = watch(browser.new_page(viewport={"width": 1280, "height": 1100}))
    page.goto(f"{args.url}/pages/organiser.html#event={event_id}")
    page.fill("#token", ADMIN)
    page.click("#token-form button[type=submit]")
    expect(page.locator("#entries-title")).to_contain_text("Ballot", timeout=15_000)
    expect(page.locator("#entered")).to_have_text("2")
    expect(page.locator("#admitted")).to_be_hidden()
    expect(page.locator("#blocked-ballot-only")).to_have_text("1", timeout=15_000)
    expect(page.locator("#beacon-field")).to_be_visible()
    expect(page.locator("#beacon-round")).to_have_text(str(round_no))
    check(True, "a ballot: its entries, the grab at it under ballot only, and the draw asking for the beacon round's signature")
    axe(page, "the organiser's page (a ballot naming a beacon round)")
    page.fill("#draw-secret", secret)
    page.fill("#draw-beacon", "ab" * 48)
    page.click("#draw-form button[type=submit]")
    expect(page.locator("#draw-result")).to_contain_text("did not run", timeout=15_000)
    check(page.input_value("#draw-secret") == "", f"a draw with a wrong signature is refused and said ({page.locator('#draw-result').text_content()!r})")
    page.close()


def reference(browser):
    page = watch(browser.new_page())
    page.goto(f"{args.url}/pages/reference.html")
    expect(page.locator("#api")).to_contain_text("/admin/events/{id}/live", timeout=30_000)
    check(True, "the API reference renders openapi.yaml")
    links = page.locator("header nav a").evaluate_all("els => els.map(e => e.getAttribute('href'))")
    check({"organiser.html", "door.html"} <= set(links), f"the reference links to the organiser's and the door's pages ({links})")
    servers = page.locator(".servers select option").evaluate_all("els => els.map(e => e.value)")
    check(servers == [args.url], f"the reference's one server is the page's own origin ({servers})")
    # "Try it out" calls this origin, not the spec's http://127.0.0.1:3000.
    operation = page.locator("#operations-sale-listEvents")
    operation.locator(".opblock-summary-control").click()
    operation.locator(".try-out__btn").click()
    with page.expect_request(lambda r: "/events" in r.url and r.resource_type in ("fetch", "xhr")) as asked:
        operation.locator(".execute").click()
    check(asked.value.url.startswith(f"{args.url}/events"), f"'Try it out' calls the page's origin ({asked.value.url})")
    page.close()


with sync_playwright() as p:
    browser = launch(p)
    parts = {
        "door-faults": lambda: door_faults(browser),
        "door-renewal": lambda: door_renewal(browser, release("renewal", 1)),
        "door-shift": lambda: door_shift(browser),
    }
    for part in filter(None, args.only.split(",")):
        parts[part]()
    if CASES_FAILED:
        fail(f"{len(CASES_FAILED)} cases failed: {CASES_FAILED}")
    if args.only:
        print(f"browser: every check of {args.only} passed")
        sys.exit(0)
    sale_event, _ = organiser(browser)
    camera_pass, camera_ticket = door(browser, sale_event)
    door_faults(browser)
    door_renewal(browser, sale_event)
    door_shift(browser)
    # Orders held unstored (the mail consumer held: after the door, which needs the mail) age on a
    # page left open while the tests that need no mail run: the wait for "stuck" is mostly theirs.
    held = hold_orders(browser)
    organiser_phone(browser)
    organiser_fair_open(browser)
    organiser_ballot(browser)
    reference(browser)
    camera(p, sale_event, camera_pass, camera_ticket)
    organiser_stuck(held)
    browser.close()
check(not STRAYS, f"the pages asked nothing of anywhere but the runner ({STRAYS[:5]})")
print("browser: every check passed")
