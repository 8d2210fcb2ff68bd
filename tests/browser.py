"""The pages in a real browser (scripts/browser starts a runner and calls this).

Headless Chromium from Debian, driven by Playwright:

1. The organiser's page during a small sale (40 users for 12 tickets): once the report endpoint
   says the sale has drained, the page's figures (read from its DOM) are the report's, its charts
   have drawn the outcomes, and its audit is green. A screenshot goes to <out>/organiser.png.
2. The door's page with real passes from real mail (the local SES): a genuine pass is let in; the
   same pass again, a tampered pass, a pass of another event, and a pass another door checked in
   are refused. With the network cut (the context offline), the page opens from its service
   worker, lets a pass in, refuses its second scan on this device, and lets in a pass another door
   had already checked in; with the network back it syncs both: the server holds the offline
   check-in at its time, and the conflict is shown on the page and counted by the audit.
3. The door's camera: Chromium's fake camera plays a video of a real pass's QR code (drawn with
   segno from the pass in the mail); the page reads it (jsQR, or the browser's BarcodeDetector
   where it reads QR codes) and lets the ticket in.
4. Both pages pass axe-core with no serious or critical violation.

Exits non-zero on the first failure, with what was expected and what was seen.
"""

import argparse
import base64
import concurrent.futures
import hashlib
import hmac
import json
import os
import re
import sys
import time
import urllib.error
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
args = parser.parse_args()
RUN = re.sub(r"[^A-Za-z0-9-]", "-", args.run)[-40:]
# Condition waits: how long a drain or a page update may take before the test says it did not.
PATIENCE_S = 90


def fail(message):
    print(f"browser: FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)
    print(f"browser: ok: {message}")


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
    # The rates: the tallies reach the page within a couple of seconds of the grabs.
    expect(page.locator("#rates-legend")).to_contain_text("OK", timeout=15_000)
    expect(page.locator("#rates-legend")).to_contain_text("SOLD_OUT")
    check(page.locator("#rates-chart polyline").count() >= 2, "the rates chart draws a line per outcome")
    check(page.locator("#stock-chart polyline").count() == 1, "the stock curve is drawn")
    page.screenshot(path=os.path.join(args.out, "organiser.png"), full_page=True)
    axe(page, "the organiser's page")
    page.close()
    return event_id, results


def door(browser, event_id):
    # Another event, with one ticket: its pass is genuine, but not this event's.
    other = release("other", 1)
    sale(other, [f"{RUN}-other-fan"])
    drained(other, 1)
    mine = wait_for("the sale's passes in the local mail", lambda: (lambda p: p if len(p) >= 5 else None)(passes(event_id)))
    theirs = list(passes(other))
    check(len(theirs) == 1, "the other event's pass is in the mail")
    genuine, elsewhere, offline_one, offline_conflict, for_camera = sorted(mine, key=lambda p: mine[p]["n"])[:5]

    # Two passes are checked in at another door first (the API directly).
    for p in (elsewhere, offline_conflict):
        status, body = api("POST", f"/admin/events/{event_id}/check-in", STAFF, {"pass": p})
        check(status == 200, f"another door checks ticket {mine[p]['n']} in ({status} {body})")

    context = browser.new_context(viewport={"width": 900, "height": 1100})
    page = watch(context.new_page())
    set_up_door(page, event_id)

    def scan(p, expected, headline, detail=None):
        page.fill("#pass", p)
        page.click("#pass-form button[type=submit]")
        verdict = page.locator("#verdict")
        expect(verdict).to_have_attribute("data-result", expected, timeout=15_000)
        expect(page.locator("#verdict-text")).to_have_text(headline)
        if detail:
            expect(page.locator("#verdict-detail")).to_contain_text(detail)
        # The next scan's verdict must be its own: clear this one.
        page.evaluate("() => { const v = document.getElementById('verdict'); delete v.dataset.result; }")

    n = mine[genuine]["n"]
    # A device set up before a pass-key rotation holds only keys the new passes do not name: it
    # fetches the event's keys again and lets the pass in.
    page.evaluate(f"""() => localStorage.setItem('ticket-grab.door.{event_id}.keys',
        JSON.stringify([{{id: 'rotated-away', key: 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'}}]))""")
    scan_keep = scan
    page.fill("#pass", genuine)
    page.click("#pass-form button[type=submit]")
    expect(page.locator("#verdict")).to_have_attribute("data-result", "admitted", timeout=15_000)
    expect(page.locator("#verdict-ticket")).to_have_text(f"Ticket {n}")
    page.evaluate("() => { delete document.getElementById('verdict').dataset.result; }")
    kept_keys = page.evaluate(f"() => JSON.parse(localStorage.getItem('ticket-grab.door.{event_id}.keys'))")
    check([k["id"] for k in kept_keys] != ["rotated-away"], f"a device holding keys from before a rotation fetched them again ({kept_keys})")
    scan_keep(genuine, "refused", "Already in", "at this door")
    tampered = genuine[:-6] + ("AAAAAA" if not genuine.endswith("AAAAAA") else "BBBBBB")
    scan(tampered, "refused", "Refused", "forged or altered")
    scan(theirs[0], "refused", "Refused", "another event")
    scan(elsewhere, "refused", "Already in", "checked in at")
    status, report = api("GET", f"/admin/events/{event_id}/report", ADMIN)
    check(report["checked_in"] == 3, f"the server holds three check-ins: two at the other door, ticket {n} here ({report['checked_in']})")
    page.screenshot(path=os.path.join(args.out, "door.png"), full_page=True)
    axe(page, "the door's page")

    # The network cut: the page reopens from its service worker and keeps check-ins on the device.
    page.evaluate("() => navigator.serviceWorker.ready.then(() => true)")
    page.wait_for_function("() => navigator.serviceWorker.controller !== null")
    context.set_offline(True)
    page.reload()
    expect(page.locator("#scanner")).to_be_visible(timeout=15_000)
    expect(page.locator("#network")).to_contain_text("Offline")
    scan(offline_one, "admitted", "Let in", "offline")
    scan(offline_one, "refused", "Already in", "at this door")
    scan(offline_conflict, "admitted", "Let in", "offline")
    expect(page.locator("#pending-count")).to_have_text("2")
    status, report = api("GET", f"/admin/events/{event_id}/report", ADMIN)
    check(report["checked_in"] == 3, "nothing reached the server while the door was offline")

    context.set_offline(False)
    expect(page.locator("#pending-count")).to_have_text("0", timeout=30_000)
    expect(page.locator("#conflicts tr")).to_have_count(1)
    expect(page.locator("#conflict-alert")).to_contain_text("1 pass let in here offline")
    expect(page.locator("#conflicts")).to_contain_text(str(mine[offline_conflict]["n"]))
    status, report = api("GET", f"/admin/events/{event_id}/report", ADMIN)
    check(report["checked_in"] == 4, f"the offline check-in reached the server ({report['checked_in']})")
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
    page.screenshot(path=os.path.join(args.out, "door-synced.png"), full_page=True)
    context.close()
    return for_camera, mine[for_camera]["n"]


def set_up_door(page, event_id):
    """Opens the door's page and sets it up for the event with a staff token."""
    page.goto(f"{args.url}/pages/door.html")
    page.fill("#event", event_id)
    page.fill("#token", STAFF)
    page.click("#setup-form button[type=submit]")
    expect(page.locator("#scanner")).to_be_visible(timeout=15_000)


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
    browser = launch(p, ["--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
                         f"--use-file-for-fake-video-capture={video}"])
    context = browser.new_context(permissions=["camera"])
    page = watch(context.new_page())
    set_up_door(page, event_id)
    page.click("#camera-button")
    expect(page.locator("#verdict")).to_have_attribute("data-result", "admitted", timeout=30_000)
    expect(page.locator("#verdict-ticket")).to_have_text(f"Ticket {ticket_no}")
    status, report = api("GET", f"/admin/events/{event_id}/report", ADMIN)
    native = page.evaluate("async () => 'BarcodeDetector' in window && (await BarcodeDetector.getSupportedFormats()).includes('qr_code')")
    check(report["checked_in"] == 5, f"the camera read ticket {ticket_no}'s QR code ({'BarcodeDetector' if native else 'jsQR'}) "
                                     f"and checked it in ({report['checked_in']})")
    browser.close()


def reference(browser):
    page = watch(browser.new_page())
    page.goto(f"{args.url}/pages/reference.html")
    expect(page.locator("#api")).to_contain_text("/admin/events/{id}/live", timeout=30_000)
    check(True, "the API reference renders openapi.yaml")
    page.close()


with sync_playwright() as p:
    browser = launch(p)
    sale_event, _ = organiser(browser)
    camera_pass, camera_ticket = door(browser, sale_event)
    reference(browser)
    browser.close()
    camera(p, sale_event, camera_pass, camera_ticket)
check(not STRAYS, f"the pages asked nothing of anywhere but the runner ({STRAYS[:5]})")
print("browser: every check passed")
