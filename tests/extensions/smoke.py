#!/usr/bin/env python3
# Smoke test for the test extensions: spawns each one as dhara would (manifest command, folder as cwd)
# and checks its protocol behaviour, well-behaved or hostile. Usage: python3 tests/extensions/smoke.py [name...]
import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CTX = {"cwd": "/tmp", "sessionId": "smoke"}


class Skip(Exception):
    pass


class Ext:
    """One running extension: stdout lines arrive on a queue; stderr goes to a temp file."""

    def __init__(self, name, env_extra=None, args=()):
        folder = os.path.join(HERE, name)
        with open(os.path.join(folder, "manifest.json")) as f:
            self.manifest = json.load(f)
        argv = shlex.split(self.manifest["runtime"]["command"])
        # A native binary may come from the build tree (ctest passes DHARA_ECHO_NATIVE).
        built = os.environ.get("DHARA_ECHO_NATIVE") if name == "echo-native" else None
        if built:
            argv[0] = built
        elif argv[0].startswith("./") and not os.path.exists(os.path.join(folder, argv[0])):
            raise Skip(f"{argv[0]} is not built (run {name}/build.sh)")
        argv += list(args)
        self.stderr = tempfile.TemporaryFile()
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TERM", "TMPDIR")}
        env.update({"DHARA_EXTENSION": self.manifest["name"], **(env_extra or {})})
        self.proc = subprocess.Popen(argv, cwd=folder, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 1

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)  # EOF

    def write(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, method, params=None, id_=None, notify=False):
        msg = {"jsonrpc": "2.0", "method": method, "params": params if params is not None else {}}
        if not notify:
            if id_ is None:
                id_, self.next_id = self.next_id, self.next_id + 1
            msg["id"] = id_
        self.write((json.dumps(msg, separators=(",", ":")) + "\n").encode())
        return id_

    def raw_line(self, timeout=2.0):
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no output within {timeout} s") from None
        if line is None:
            raise AssertionError(f"stdout closed (exit code {self.proc.poll()})")
        return line

    def recv(self, timeout=2.0):
        line = self.raw_line(timeout)
        assert line.endswith(b"\n"), "line without newline"
        msg = json.loads(line)
        assert msg.get("jsonrpc") == "2.0", f"jsonrpc must be '2.0': {msg}"
        return msg

    def silent(self, seconds):
        try:
            line = self.lines.get(timeout=seconds)
        except queue.Empty:
            return
        raise AssertionError(f"expected no output, got {line[:200]!r}")

    def call(self, method, params=None, id_=None, timeout=2.0):
        id_ = self.send(method, params, id_)
        msg = self.recv(timeout)
        assert msg.get("id") == id_ and type(msg.get("id")) is type(id_), f"id {id_!r} not echoed: {msg}"
        return msg

    def result(self, method, params=None, id_=None, timeout=2.0):
        msg = self.call(method, params, id_, timeout)
        assert "result" in msg and "error" not in msg, f"{method}: expected a result, got {msg}"
        return msg["result"]

    def execute(self, tool, inp=None, call_id=None, id_=None, timeout=2.0):
        return self.result("tools/execute", self.exec_params(tool, inp, call_id), id_, timeout)

    def exec_params(self, tool, inp=None, call_id=None):
        return {"toolCallId": call_id or f"call-{tool}-{self.next_id}", "toolName": tool,
                "input": inp or {}, "context": CTX}

    def initialize(self, tools):
        t0 = time.monotonic()
        res = self.result("initialize", {"protocolVersion": "0.1.0", "capabilities": {"tools": True},
                                         "config": {}}, timeout=5.0)
        self.init_ms = (time.monotonic() - t0) * 1000
        assert res.get("protocolVersion") == "0.1.0", f"protocolVersion: {res}"
        assert res.get("name") == self.manifest["name"], f"name {res.get('name')!r} != manifest"
        assert isinstance(res.get("version"), str), "version missing"
        names = [t.get("name") for t in res.get("tools", [])]
        assert names == tools, f"tools {names} != {tools}"
        for t in res["tools"]:
            assert isinstance(t.get("description"), str), f"{t['name']}: description"
            assert t.get("parameters", {}).get("type") == "object", f"{t['name']}: parameters"
        return res

    def shutdown(self):
        assert self.result("shutdown") == {"status": "ok"}, "shutdown result"
        self.expect_exit(0)

    def expect_exit(self, code, timeout=2.0):
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running {timeout} s later (expected exit {code})") from None
        assert rc == code, f"exit code {rc}, expected {code}"

    def stderr_tail(self):
        self.stderr.seek(0, os.SEEK_END)
        self.stderr.seek(max(0, self.stderr.tell() - 500))
        return self.stderr.read().decode(errors="replace")

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


def text_of(result):
    content = result.get("content")
    assert isinstance(content, list) and content and content[0].get("type") == "text", f"content: {result}"
    return content[0]["text"]


def check_error(msg, code):
    assert "error" in msg and "result" not in msg, f"expected error {code}, got {msg}"
    assert msg["error"].get("code") == code, f"error code {msg['error'].get('code')}, expected {code}"
    assert isinstance(msg["error"].get("message"), str), "error message"


# --- the well-behaved ones ---------------------------------------------------------------------

def full_echo(name):
    def run(x):
        x.initialize(["echo", "sleep", "progress", "env", "fail"])
        tricky = 'quote " backslash \\ newline \n tab \t unicode é 漢 😀 "id":7 {"text":"x"}'
        assert text_of(x.execute("echo", {"text": tricky})) == tricky, "echo text"
        assert text_of(x.execute("echo", {"text": "s"}, id_="string-id")) == "s", "string id"
        res = x.execute("fail", {"message": "boom"})
        assert res.get("isError") is True and text_of(res) == "boom", f"fail: {res}"
        res = x.execute("env", {"name": "DHARA_SMOKE"})
        assert res["metadata"]["value"] == "visible" and json.loads(text_of(res)) == "visible", f"env: {res}"
        res = x.execute("env", {"name": "DHARA_SMOKE_UNSET"})
        assert res["metadata"]["value"] is None and text_of(res) == "null", f"env unset: {res}"
        # notifications get no reply; unknown methods get -32601
        x.send("no/such/notification", notify=True)
        check_error(x.call("no/such/method"), -32601)
        # progress: count notifications carrying the toolCallId, then the result
        id_ = x.send("tools/execute", x.exec_params("progress", {"count": 3}, "p1"))
        for i in range(1, 4):
            n = x.recv()
            assert n.get("method") == "tools/progress" and "id" not in n, f"progress {i}: {n}"
            assert n["params"]["toolCallId"] == "p1" and n["params"]["update"]["progress"] == i, f"{n}"
        assert x.recv().get("id") == id_, "progress result"
        # sleep: other calls are answered meanwhile; tools/cancel answers it with -32004
        t0 = time.monotonic()
        sid = x.send("tools/execute", x.exec_params("sleep", {"ms": 20000}, "s1"))
        assert text_of(x.execute("echo", {"text": "while sleeping"})) == "while sleeping"
        x.send("tools/cancel", {"toolCallId": "someone-else"}, notify=True)
        x.silent(0.2)
        x.send("tools/cancel", {"toolCallId": "s1"}, notify=True)
        msg = x.recv(timeout=1.0)
        assert msg.get("id") == sid, f"cancel reply id: {msg}"
        check_error(msg, -32004)
        assert time.monotonic() - t0 < 2.0, "cancel too slow"
        res = x.execute("sleep", {"ms": 50})
        assert text_of(res) == "slept 50 ms", f"short sleep: {res}"
        x.shutdown()
    return run


def native_echo(x):
    x.initialize(["echo"])
    tricky = 'quote " backslash \\ newline \n unicode é 😀 "id":7 {"text":"x"} "method":"shutdown"'
    assert text_of(x.execute("echo", {"text": tricky})) == tricky, "echo text"
    assert text_of(x.execute("echo", {"text": "s"}, id_="str\"id")) == "s", "string id"
    check_error(x.call("no/such/method"), -32601)
    x.send("tools/cancel", {}, notify=True)
    # many requests in one write, then one request split across writes
    batch = b"".join((json.dumps({"jsonrpc": "2.0", "id": 1000 + i, "method": "tools/execute",
                                  "params": x.exec_params("echo", {"text": f"t{i}"})}) + "\n").encode()
                     for i in range(500))
    x.write(batch)
    for i in range(500):
        msg = x.recv()
        assert msg["id"] == 1000 + i and text_of(msg["result"]) == f"t{i}", f"batch {i}: {msg}"
    line = (json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/execute",
                        "params": x.exec_params("echo", {"text": "y" * 3_000_000})}) + "\n").encode()
    x.write(line[:10])
    x.silent(0.05)
    x.write(line[10:])
    assert text_of(x.recv()["result"]) == "y" * 3_000_000, "split 3 MB line"
    x.shutdown()


def native_checked(x):
    # --manifest-capabilities: the tool has no capabilities key (it requires the manifest's).
    res = x.initialize(["echo"])
    assert "capabilities" not in res["tools"][0], res["tools"][0]
    assert text_of(x.execute("echo", {"text": "checked"})) == "checked", "echo text"
    x.shutdown()


# --- the hostile ones --------------------------------------------------------------------------

def crash_ok(x):
    x.initialize(["crash", "ok"])
    assert text_of(x.execute("ok")) == "ok"
    x.shutdown()


def crash_crash(x):
    x.initialize(["crash", "ok"])
    x.send("tools/execute", x.exec_params("crash"))
    x.expect_exit(3)
    try:
        line = x.lines.get(timeout=1.0)
    except queue.Empty:
        raise AssertionError("stdout not closed after the crash") from None
    assert line is None, f"crash replied: {line!r}"
    assert "exiting with code 3" in x.stderr_tail(), "stderr tail"


def hang(sigterm_kills, tools=("hang", "ok")):
    def run(x):
        x.initialize(list(tools))
        assert text_of(x.execute("ok")) == "ok"
        if "late" in tools:
            t0 = time.monotonic()
            assert text_of(x.execute("late", {"ms": 300})) == "late"
            assert time.monotonic() - t0 >= 0.3, "late answered before its ms"
        x.send("tools/execute", x.exec_params("hang", call_id="h1"))
        x.silent(0.3)
        x.send("tools/cancel", {"toolCallId": "h1"}, notify=True)
        x.send("shutdown")
        x.silent(0.3)
        x.proc.send_signal(signal.SIGTERM)
        if sigterm_kills:
            x.expect_exit(-signal.SIGTERM)
            return
        time.sleep(0.5)
        assert x.proc.poll() is None, f"died on SIGTERM (exit {x.proc.returncode})"
        x.proc.send_signal(signal.SIGKILL)
        x.expect_exit(-signal.SIGKILL)
    return run


def hang_init(x):
    x.send("initialize", {"protocolVersion": "0.1.0", "capabilities": {"tools": True}, "config": {}})
    x.silent(1.0)
    x.proc.stdin.close()  # EOF does not wake it either
    time.sleep(0.2)
    assert x.proc.poll() is None, "exited after EOF"
    x.proc.send_signal(signal.SIGTERM)
    x.expect_exit(-signal.SIGTERM)


def garbage(x):
    x.initialize(["garbage", "ok"])
    x.send("tools/execute", x.exec_params("garbage"))
    line = x.raw_line()
    assert line == b"this is not json\n", f"garbage line: {line!r}"
    try:
        json.loads(line)
        raise AssertionError("garbage line parsed as JSON")
    except ValueError:
        pass
    x.shutdown()


def long_line(x):
    x.initialize(["long", "ok"])
    t0 = time.monotonic()
    id_ = x.send("tools/execute", x.exec_params("long"))
    line = x.raw_line(timeout=10)
    assert len(line) == 9 * 1024 * 1024 + 1 and line.count(b"\n") == 1, f"line length {len(line)}"
    assert json.loads(line)["id"] == id_, "long reply id"
    x.long_ms = (time.monotonic() - t0) * 1000
    res = x.execute("long", {"bytes": 1000})
    assert len(json.dumps(res)) > 900, "1000-byte reply"
    x.shutdown()


def progress_flood(x):
    x.initialize(["flood", "ok"])
    id_ = x.send("tools/execute", x.exec_params("flood", call_id="f1"))
    for i in range(1, 100001):
        n = x.recv(timeout=10)
        assert n.get("method") == "tools/progress" and n["params"]["toolCallId"] == "f1", f"{i}: {n}"
        assert n["params"]["update"]["progress"] == i, f"progress {i}: {n}"
    assert x.recv().get("id") == id_, "flood result"
    x.shutdown()


def stderr_flood(x):
    x.initialize(["flood", "ok"])
    assert text_of(x.execute("flood", timeout=20)) == f"wrote {20 * 1024 * 1024} bytes"
    x.stderr.seek(0, os.SEEK_END)
    assert x.stderr.tell() == 20 * 1024 * 1024, f"stderr size {x.stderr.tell()}"
    x.shutdown()


def unknown_id(x):
    x.initialize(["echo"])
    for id_, wrong in ((7, 1007), ("abc", "abc-wrong")):
        x.send("tools/execute", x.exec_params("echo", {"text": "right"}), id_)
        first, second, third = x.recv(), x.recv(), x.recv()
        assert first["id"] == wrong and text_of(first["result"]) != "right", f"wrong id: {first}"
        assert second["id"] == id_ and text_of(second["result"]) == "right", f"right: {second}"
        assert third == second, f"duplicate: {third}"
    x.shutdown()


def fork_child(x):
    x.initialize(["orphan", "ok"])
    x.send("tools/execute", x.exec_params("orphan"))
    x.expect_exit(5)
    # The grandchild still holds stdout: no EOF yet (dhara must not wait for one).
    try:
        line = x.lines.get(timeout=0.5)
    except queue.Empty:
        line = "open"
    assert line == "open", f"stdout closed or replied: {line!r}"


def fs_tool(x):
    x.initialize(["read", "overreach"])
    got = x.execute("read", {"path": os.path.join(HERE, "fs-tool", "manifest.json")})
    assert '"fs-tool"' in text_of(got), f"read: {got}"
    x.shutdown()


def host_client(x):
    x.initialize(["host"])
    # Without dhara nobody answers the host request: send one, answer it ourselves.
    x.send("tools/execute", x.exec_params("host", {"method": "host/check", "params": {"capability": "ui:notify"}}))
    req = x.recv()
    assert req.get("method") == "host/check", f"host request: {req}"
    x.write((json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": {"allowed": True}}) + "\n").encode())
    reply = x.recv()
    assert '"allowed": true' in text_of(reply["result"]), f"answer: {reply}"
    x.shutdown()


def crash_start(x):
    # Exits before reading anything: no initialize answer, just the exit and its stderr line.
    x.expect_exit(1)
    assert "before the handshake" in x.stderr_tail(), "stderr tail"


def late_host(x):
    x.initialize(["read_later", "wait"])
    assert text_of(x.execute("wait", {"ms": 10})) == "waited"
    id_ = x.send("tools/execute", x.exec_params("read_later", {"path": "a.txt", "delay_ms": 0}))
    req = x.recv()
    assert req.get("method") == "host/fs/read" and req["params"] == {"path": "a.txt"}, f"host request: {req}"
    x.write((json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": {"content": "alpha"}}) + "\n").encode())
    reply = x.recv()
    assert reply["id"] == id_ and "alpha" in text_of(reply["result"]), f"answer: {reply}"
    x.shutdown()


def close_stdin(x):
    x.initialize(["close", "close-stdin", "ok"])
    assert text_of(x.execute("close-stdin")) == "stdin closed"
    try:
        for _ in range(100):  # the pipe has no reader: a write fails at once
            x.write(b"{}\n")
        raise AssertionError("stdin still open after close-stdin")
    except (BrokenPipeError, OSError):
        pass
    time.sleep(0.3)
    assert x.proc.poll() is None, f"exited (code {x.proc.returncode}) after closing stdin"
    x.proc.send_signal(signal.SIGTERM)
    x.expect_exit(-signal.SIGTERM)


def close_stdout(x):
    x.initialize(["close", "close-stdin", "ok"])
    assert text_of(x.execute("ok")) == "ok"
    x.send("tools/execute", x.exec_params("close"))
    try:
        line = x.lines.get(timeout=2.0)
    except queue.Empty:
        raise AssertionError("stdout still open after close") from None
    assert line is None, f"close replied: {line!r}"
    x.send("tools/execute", x.exec_params("ok"))  # still reads stdin: the write does not fail
    x.proc.stdin.close()
    time.sleep(0.3)
    assert x.proc.poll() is None, f"exited (code {x.proc.returncode}) after closing stdout"
    x.proc.send_signal(signal.SIGTERM)
    x.expect_exit(-signal.SIGTERM)


TESTS = [
    ("echo-py", "full protocol", full_echo("echo-py")),
    ("echo-node", "full protocol", full_echo("echo-node")),
    ("echo-native", "echo, batched and split lines", native_echo),
    ("echo-native", "--manifest-capabilities", native_checked),
    ("crash", "ok then shutdown", crash_ok),
    ("crash", "crash exits 3 without replying", crash_crash),
    ("hang-term", "hang, SIGTERM kills", hang(True)),
    ("hang-ignore-term", "late, hang, survives SIGTERM, SIGKILL kills", hang(False, ("hang", "ok", "late"))),
    ("hang-init", "never answers initialize", hang_init),
    ("garbage", "writes a non-JSON line", garbage),
    ("long-line", "9 MiB single line", long_line),
    ("progress-flood", "100000 notifications then result", progress_flood),
    ("stderr-flood", "20 MiB stderr then result", stderr_flood),
    ("unknown-id", "wrong id, right id, duplicate", unknown_id),
    ("fork-child", "exits 5, a grandchild keeps stdout open", fork_child),
    ("crash-start", "exits 1 before the handshake", crash_start),
    ("close-stdout", "closes stdout, keeps running", close_stdout),
    ("close-stdout", "closes stdin, answers, keeps running", close_stdin),
    ("late-host", "a host request, then the answer", late_host),
    ("fs-tool", "declares filesystem:read, reads a file", fs_tool),
    ("host-client", "relays one host request", host_client),
]


def main():
    only = set(sys.argv[1:])
    folders = sorted(d for d in os.listdir(HERE) if os.path.isfile(os.path.join(HERE, d, "manifest.json")))
    untested = set(folders) - {t[0] for t in TESTS}
    passed = failed = skipped = 0
    for name in sorted(untested):
        print(f"FAIL {name}: no smoke test for this extension")
        failed += 1
    for name, what, fn in TESTS:
        if only and name not in only:
            continue
        label = f"{name}: {what}"
        x = None
        t0 = time.monotonic()
        try:
            x = Ext(name, {"DHARA_SMOKE": "visible"}, ("--manifest-capabilities",) if fn is native_checked else ())
            fn(x)
            extra = f", initialize {x.init_ms:.0f} ms" if hasattr(x, "init_ms") else ""
            print(f"ok   {label} ({(time.monotonic() - t0) * 1000:.0f} ms{extra})")
            passed += 1
        except Skip as e:
            print(f"skip {label}: {e}")
            skipped += 1
        except Exception as e:  # noqa: BLE001 — any failure is reported, the run goes on
            print(f"FAIL {label}: {type(e).__name__}: {e}")
            if x is not None:
                print("     stderr tail: " + x.stderr_tail().strip().replace("\n", "\n     "))
            failed += 1
        finally:
            if x is not None:
                x.close()
    if skipped:
        print(f"{skipped} skipped")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
