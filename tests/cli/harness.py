"""The tiny runner the CLI test scripts share: every `test_*` function of a module runs, each
failure is reported, and the last line is `N passed, M failed` (exit 1 on any failure). Also
the JSON-RPC line client the serve tests drive `dhara serve --stdio` with."""
import json
import os
import select
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


def vm_hwm_kib(pid):
    """The process's peak resident memory so far (from its exec on), in KiB."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


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


class RpcClient:
    """JSON-RPC 2.0 lines over a process's stdin and stdout (`dhara serve --stdio`). A subclass
    starts the process, sets `self.proc` and calls this `__init__`; `describe()` adds what helps
    when no message comes (the server's stderr, the bytes read so far)."""

    def __init__(self, proc, describe=lambda: ""):
        self.proc = proc
        self.buffer = b""
        self.next_id = 0
        self.describe = describe

    def send(self, message):
        self.raw((json.dumps(message) + "\n").encode())

    def raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def read(self, limit=30):
        """The next message from the server (None at EOF); fails after `limit` s of silence."""
        deadline = time.monotonic() + limit
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            assert left > 0, f"no message from dhara within {limit} s; {self.describe()}"
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
                if not chunk:
                    return None
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def request(self, method, params=None):
        """Sends a request; returns its id."""
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.next_id
