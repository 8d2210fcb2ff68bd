"""Smoke test of the deployed stack in the local cloud (scripts/local-cloud runs it).

Everything goes through what `sam deploy` created in MiniStack: tokens from the emulated Cognito
user pool, requests through the HTTP API and its JWT authorizer to the real bootstrap binaries, the
order through the real SQS event source mapping, the mail as the emulated SES accepted it, reconcile
on its EventBridge schedule, and an admin's release by direct invocation (`sam remote invoke`).

Runs with the SAM CLI's own Python (boto3 comes with it): no other dependency.
"""

import base64
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone

import boto3

ENDPOINT = os.environ["AWS_ENDPOINT_URL"].rstrip("/")
STACK = sys.argv[1] if len(sys.argv) > 1 else "ticketgrab-cloud"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = str(int(time.time()))
checks = 0


def ok(what):
    global checks
    checks += 1
    print(f"  ok  {what}", flush=True)


def fail(what):
    print(f"FAIL  {what}", flush=True)
    sys.exit(1)


def expect(cond, what):
    ok(what) if cond else fail(what)


def eventually(what, probe, limit):
    """Polls real state until `probe` returns a truthy value, for at most `limit` seconds."""
    deadline = time.time() + limit
    while time.time() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(1)
    fail(f"{what} within {limit} s")


def rfc3339(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


session = boto3.session.Session(region_name=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
cfn = session.client("cloudformation")
cognito = session.client("cognito-idp")
dynamodb = session.client("dynamodb")
lam = session.client("lambda")

outputs = {o["OutputKey"]: o["OutputValue"] for o in cfn.describe_stacks(StackName=STACK)["Stacks"][0]["Outputs"]}
for key in ["ApiUrl", "ApiId", "UserPoolId", "UserPoolClientId", "TableName", "OrdersQueueName", "ReleaseFunctionName"]:
    expect(outputs.get(key), f"stack output {key} = {outputs.get(key)}")
API = f"{ENDPOINT}/_aws/execute-api/{outputs['ApiId']}/$default"
POOL, CLIENT, TABLE = outputs["UserPoolId"], outputs["UserPoolClientId"], outputs["TableName"]


def call(method, path, token=None, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(API + path, data=data, method=method)
    req.add_header("content-type", "application/json")
    if token:
        req.add_header("authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw or b"null")
        except json.JSONDecodeError:
            return e.code, raw.decode(errors="replace")


def user_token(email, admin, group=None):
    """A user of the emulated pool and its ID token (the token that carries `email`)."""
    password = "Local-cloud-" + RUN + "x"
    cognito.admin_create_user(UserPoolId=POOL, Username=email, MessageAction="SUPPRESS",
                              UserAttributes=[{"Name": "email", "Value": email},
                                              {"Name": "email_verified", "Value": "true"}])
    cognito.admin_set_user_password(UserPoolId=POOL, Username=email, Password=password, Permanent=True)
    if admin:
        cognito.admin_add_user_to_group(UserPoolId=POOL, Username=email, GroupName="admin")
    if group:
        cognito.admin_add_user_to_group(UserPoolId=POOL, Username=email, GroupName=group)
    auth = cognito.admin_initiate_auth(UserPoolId=POOL, ClientId=CLIENT, AuthFlow="ADMIN_USER_PASSWORD_AUTH",
                                       AuthParameters={"USERNAME": email, "PASSWORD": password})
    token = auth["AuthenticationResult"]["IdToken"]
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    return token, claims


print(f"local cloud smoke test: stack {STACK}, API {API}")

# 1. The authorizer: no token, a garbage token.
status, _ = call("GET", "/events")
expect(status == 401, f"no token -> 401 at the API (got {status})")
status, _ = call("GET", "/events", token="not.a.jwt")
expect(status == 401, f"garbage token -> 401 at the API (got {status})")

# 2. Tokens from the user pool.
admin_token, admin_claims = user_token(f"admin-{RUN}@example.com", admin=True)
student_email = f"student-{RUN}@example.com"
student_token, student_claims = user_token(student_email, admin=False)
expect("admin" in str(admin_claims.get("cognito:groups", "")), "the admin's ID token carries cognito:groups admin")
expect(student_claims.get("email") == student_email, "the student's ID token carries the email")
expect(student_claims.get("email_verified") in (True, "true"), "the student's ID token says the email is verified (grab requires it)")

# 3. Release through the API: a student may not, an admin may.
now = datetime.now(timezone.utc)
event_id = f"smoke-{RUN}"
draft = {"id": event_id, "title": "Local cloud smoke test", "capacity": 3,
         "sale_start": rfc3339(now + timedelta(seconds=2)), "sale_end": rfc3339(now + timedelta(hours=1))}
status, body = call("POST", "/admin/events", student_token, draft)
expect(status == 403 and body.get("code") == "FORBIDDEN", f"student release -> 403 FORBIDDEN (got {status} {body})")
status, body = call("POST", "/admin/events", admin_token, draft)
expect(status == 201 and body.get("id") == event_id, f"admin release -> 201 (got {status} {body})")

# 4. verify-hash and grab through the API.
def hash_ready():
    s, b = call("GET", f"/events/{event_id}/verify-hash", student_token)
    return b if s == 200 else None

grab_hash = eventually("verify-hash 200 once the sale opens", hash_ready, 20)["hash"]
ok("verify-hash -> 200 with a hash")
# The hash comes a few seconds early (the open margin); grab answers 403 SALE_NOT_STARTED until the
# start, as a client polling at the opening second sees.
def grab_once_open():
    s, b = call("POST", f"/events/{event_id}/grab", student_token, {"hash": grab_hash})
    if s == 403 and b.get("code") == "SALE_NOT_STARTED":
        return None
    return (s, b)

status, granted = eventually("grab answered once the sale opens", grab_once_open, 20)
expect(status == 202 and granted.get("status") == "PENDING", f"grab -> 202 PENDING (got {status} {granted})")
status, again = call("POST", f"/events/{event_id}/grab", student_token, {"hash": grab_hash})
expect(status == 200 and again.get("order_id") == granted["order_id"], f"grab again -> 200, same order (got {status} {again})")
status, body = call("POST", f"/events/{event_id}/grab", admin_token, {"hash": grab_hash})
expect(status == 403 and body.get("code") == "BAD_HASH", f"another user's hash -> 403 BAD_HASH (got {status})")

# 5. The order reaches DynamoDB through the real event source mapping, and mail sends one mail.
def confirmed():
    s, b = call("GET", f"/events/{event_id}/order", student_token)
    return b if s == 200 and b.get("status") == "CONFIRMED" else None

order = eventually("the order CONFIRMED through SQS -> mail -> DynamoDB", confirmed, 90)
expect(order["order_id"] == granted["order_id"], "the confirmed order is the one grab answered")
ticket = dynamodb.get_item(TableName=TABLE, ConsistentRead=True,
                           Key={"PK": {"S": f"TICKET#{event_id}#{granted['ticket_no']}"}, "SK": {"S": "TICKET"}})
expect(ticket.get("Item", {}).get("order_id", {}).get("S") == granted["order_id"], "the ticket item holds the order")


def mails():
    with urllib.request.urlopen(f"{ENDPOINT}/_ministack/ses/messages", timeout=10) as r:
        sent = json.loads(r.read())
    # {"messages": {<account>: [{"Source", "To", "Subject", "BodyText", ...}, ...]}}
    sent = [m for per_account in sent["messages"].values() for m in per_account]
    return [m for m in sent if student_email in m.get("To", [])]

mine = eventually("the confirmation mail at /_ministack/ses/messages", mails, 30)
expect(len(mine) == 1 and granted["order_id"] in json.dumps(mine[0]), f"exactly one mail, naming the order ({len(mine)})")

# 6. After the grab: the pass in the mail checks in once at the door (staff), the pass key is
#    published, and a second student's ticket is given back (cancel).
staff_token, _ = user_token(f"door-{RUN}@example.com", admin=False, group="staff")
text = mine[0].get("BodyText", "")
passes = [line.split("Pass: ", 1)[1].strip() for line in text.splitlines() if "Pass: " in line]
expect(len(passes) == 1 and passes[0].startswith("TP2."), "the confirmation carries a signed ticket pass")
status, body = call("GET", f"/events/{event_id}/pass-key", student_token)
expect(status == 200 and body.get("algorithm") == "Ed25519", f"pass-key -> 200 Ed25519 (got {status})")
status, body = call("POST", f"/admin/events/{event_id}/check-in", student_token, {"pass": passes[0]})
expect(status == 403, f"a student cannot check in (got {status})")
status, body = call("POST", f"/admin/events/{event_id}/check-in", staff_token, {"pass": passes[0]})
expect(status == 200 and body.get("order_id") == granted["order_id"], f"staff check-in -> 200 (got {status} {body})")
status, body = call("POST", f"/admin/events/{event_id}/check-in", staff_token, {"pass": passes[0]})
expect(status == 409 and body.get("code") == "ALREADY_CHECKED_IN", f"second scan -> 409 ALREADY_CHECKED_IN (got {status})")
status, body = call("DELETE", f"/events/{event_id}/order", student_token)
expect(status == 409 and body.get("code") == "ALREADY_CHECKED_IN", f"a used ticket is not given back (got {status})")
second_email = f"second-{RUN}@example.com"
second_token, _ = user_token(second_email, admin=False)
status, b = call("GET", f"/events/{event_id}/verify-hash", second_token)
status, granted2 = call("POST", f"/events/{event_id}/grab", second_token, {"hash": b["hash"]})
expect(status == 202, f"a second student grabs -> 202 (got {status})")

def confirmed2():
    s, b = call("DELETE", f"/events/{event_id}/order", second_token)
    return b if s == 200 else None

cancelled = eventually("the second order cancelled once stored", confirmed2, 90)
expect(cancelled.get("status") == "CANCELLED", f"cancel -> 200 CANCELLED ({cancelled})")
status, body = call("GET", f"/admin/events/{event_id}/report", admin_token)
expect(status == 200 and body.get("checked_in") == 1 and body.get("cancelled") == 1 and body.get("passed"),
       f"the audit: 1 checked in, 1 cancelled, every check passed (got {status} {body})")

# 6b. The organiser's live view through the API, and the pages through their own route, which has
#     no authorizer.
status, body = call("GET", f"/admin/events/{event_id}/live", admin_token)
expect(status == 200 and body.get("audit", {}).get("checked_in") == 1 and body.get("capacity") == 3,
       f"the live view -> 200 with the audit (got {status} {str(body)[:200]})")
status, body = call("GET", f"/admin/events/{event_id}/live", student_token)
expect(status == 403, f"a student cannot read the live view (got {status})")
with urllib.request.urlopen(f"{API}/pages/organiser.html", timeout=30) as r:
    page = r.read().decode()
    expect(r.status == 200 and "Live sale" in page and r.headers.get("content-type", "").startswith("text/html"),
           "the organiser's page is served without a token")
status, body = call("GET", "/pages/no-such-file.html")
expect(status == 404, f"an unknown page -> 404 (got {status})")

# 7. reconcile on its schedule: its effect, the stock snapshot on the event item, appears.
def snapshot():
    item = dynamodb.get_item(TableName=TABLE, ConsistentRead=True,
                             Key={"PK": {"S": f"EVENT#{event_id}"}, "SK": {"S": "META"}}).get("Item", {})
    return item.get("remaining", {}).get("N") == "2"

eventually("reconcile (EventBridge schedule) writing the remaining snapshot", snapshot, 150)
ok("reconcile ran on its schedule: remaining snapshot = 2 (the cancelled ticket back on sale)")

# 8. An admin releases by direct invocation, as docs/DEPLOY.md shows: sam remote invoke.
with open(os.path.join(ROOT, "events", "release-direct.json")) as f:
    direct = json.load(f)
direct["id"] = f"direct-{RUN}"
# The sample's dates are an example; the run's sale is ahead of now whatever the day.
direct.update(sale_start=rfc3339(now + timedelta(days=1)), sale_end=rfc3339(now + timedelta(days=1, hours=1)))
sam = os.path.join(os.path.dirname(sys.executable), "sam")


def remote_invoke(payload):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(payload, f)
    out = subprocess.run([sam, "remote", "invoke", "ReleaseFunction", "--stack-name", STACK,
                          "--event-file", f.name, "--output", "json"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    os.unlink(f.name)
    return out


out = remote_invoke(direct)
expect(out.returncode == 0, f"sam remote invoke ReleaseFunction exits 0 ({out.stderr.strip().splitlines()[-1:]})")
status, body = call("GET", f"/events/{direct['id']}", student_token)
expect(status == 200 and body.get("capacity") == direct["capacity"], f"the directly released event is served by the API ({status})")
with open(os.path.join(ROOT, "events", "release-direct-bad.json")) as f:
    out = remote_invoke(json.load(f))
expect("INVALID_EVENT" in out.stdout + out.stderr and "capacity" in out.stdout + out.stderr,
       "the bad direct payload is refused, naming the capacity field")

# 9. A rush: released with an expected rate by direct invocation, answered with its warm fleet and
#    what to raise; reconcile, invoked directly as an admin may, provisions the fleet on the alias
#    the API invokes (docs/DESIGN.md section 12).
with open(os.path.join(ROOT, "events", "release-direct-rush.json")) as f:
    rush = json.load(f)
rush.update(id=f"rush-{RUN}", sale_start=rfc3339(now + timedelta(minutes=3)),
            sale_end=rfc3339(now + timedelta(hours=1)))
out = remote_invoke(rush)
expect(out.returncode == 0, f"sam remote invoke ReleaseFunction with a rush exits 0 ({out.stderr.strip().splitlines()[-1:]})")
released = json.loads(json.loads(out.stdout)["Payload"])
for key in ["GrabFunctionName", "VerifyHashFunctionName", "ReconcileFunctionName"]:
    expect(outputs.get(key), f"stack output {key} = {outputs.get(key)}")
# 100,000 grabs/s wants 2,400 grab and 400 verify-hash environments, within reserved concurrency.
parameters = {p["ParameterKey"]: p.get("ParameterValue") for p in cfn.describe_stacks(StackName=STACK)["Stacks"][0]["Parameters"]}
reserved = {key: int(parameters[key]) for key in ["GrabReservedConcurrency", "VerifyHashReservedConcurrency"]}
wanted = {"grab": min(2400, reserved["GrabReservedConcurrency"] or 2400),
          "verify_hash": min(400, reserved["VerifyHashReservedConcurrency"] or 400)}
fleet = released.get("warm_fleet", {})
expect({k: fleet.get(k) for k in wanted} == wanted,
       f"the rush is answered with its warm fleet, within reserved concurrency {reserved} ({fleet})")
expect(released.get("buckets") == 3 and released.get("waitlist_size") == released.get("capacity"),
       f"its numbers split over 3 Redis buckets, its waitlist as long as unsharded ({released.get('buckets')}, {released.get('waitlist_size')})")
warned = [w["code"] for w in released.get("warnings", [])]
expect("GRAB_ROUTE_THROTTLE" in warned and "API_ACCOUNT_RATE" in warned and "LIMITS_UNKNOWN" not in warned
       and ("FLEET_CAPPED" in warned) == (wanted["grab"] < 2400 or wanted["verify_hash"] < 400),
       f"and with what to raise, the account's limits read ({warned})")
report = json.loads(lam.invoke(FunctionName=outputs["ReconcileFunctionName"], Payload=b"{}")["Payload"].read())
kept = report.get("fleet", {}).get("size", {})
expect(kept.get("grab", 0) >= wanted["grab"] and kept.get("verify_hash", 0) >= wanted["verify_hash"],
       f"reconcile keeps the fleet ({report.get('fleet')})")
for key, wanted in [("GrabFunctionName", kept["grab"]), ("VerifyHashFunctionName", kept["verify_hash"])]:
    config = lam.get_provisioned_concurrency_config(FunctionName=outputs[key], Qualifier="live")
    expect(config["RequestedProvisionedConcurrentExecutions"] == wanted,
           f"{outputs[key]}:live has {wanted} environments provisioned")

print(f"smoke: {checks} passed, 0 failed")
