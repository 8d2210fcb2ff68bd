"""What a smoke script counts (tests/local_cloud_smoke.py, tests/sam_local.py,
tests/loadkit_smoke.py): each check printed, the first failure ends the run with exit 1."""

import sys

_passed = 0


def ok(what):
    global _passed
    _passed += 1
    print(f"  ok  {what}", flush=True)


def fail(what):
    print(f"FAIL  {what}", flush=True)
    sys.exit(1)


def expect(cond, what):
    ok(what) if cond else fail(what)


def passed():
    """The checks passed so far."""
    return _passed
