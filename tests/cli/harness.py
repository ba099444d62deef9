"""The tiny runner the CLI test scripts share: every `test_*` function of a module runs, each
failure is reported, and the last line is `N passed, M failed` (exit 1 on any failure)."""
import os
import sys
import time


def run(namespace):
    tests = [(n, f) for n, f in namespace.items() if n.startswith("test_") and callable(f)]
    passed = failed = 0
    for name, fn in tests:
        try:
            fn()
            print(f"ok   {name}")
            passed += 1
        except AssertionError as e:
            print(f"FAIL {name}: {str(e)[:2000]}")
            failed += 1
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


def running_in(root):
    """Processes whose working directory lies under `root` (extensions run in their folder)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/cwd").startswith(root):
                found.append(pid)
        except OSError:
            pass
    return found


def gone_from(root, limit=10):
    """True once no process has its working directory under `root` (an exiting process may
    linger in /proc for a moment after dhara returned)."""
    deadline = time.monotonic() + limit
    while running_in(root):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def wait_or_kill(pid, shown=b"", limit=60):
    """The exit status of child `pid`, waiting at most `limit` seconds: a dhara that still runs
    then (a prompt nobody answered, a hang) is killed and the test fails with what it showed,
    instead of blocking the whole run until ctest's timeout."""
    deadline = time.monotonic() + limit
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            raise AssertionError(f"dhara still ran after {limit} s and was killed; it showed: {shown[-2000:]!r}")
        time.sleep(0.05)
