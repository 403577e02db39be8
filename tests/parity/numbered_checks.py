"""The numbered check lines of the parity scripts that list what they checked: "ok N: what" for
each check that holds; the first that does not ends the script with "FAILED: what: detail"."""
import sys

passed = 0


def check(what, ok, detail=""):
    global passed
    if not ok:
        sys.exit(f"FAILED: {what}{': ' + detail if detail else ''}")
    passed += 1
    print(f"ok {passed}: {what}")


def summary():
    """The last line: how many checks held."""
    return f"{passed} passed, 0 failed"
