#!/usr/bin/env python3
"""`dhara serve --stdio` driven the way an agent core drives it: JSON-RPC 2.0 lines on a pipe,
real extensions, approvals answered by the client.

Usage: serve_test.py DHARA_BINARY SOURCE_ROOT   (registered by tests/CMakeLists.txt)
Prints `N passed, M failed` last; exits 1 on any failure.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the shared runner beside this file)

DHARA, ROOT = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
EXTENSIONS = os.path.join(ROOT, "tests", "extensions")


class Server(harness.RpcClient):
    """A temporary home with echo-py, fs-tool and crash installed, a project holding a.txt,
    and `dhara serve --stdio` running in it."""

    def __init__(self, approve_fs=False, args=(), project="project"):
        self.root = tempfile.mkdtemp(prefix="dhara-serve-")
        self.home = os.path.join(self.root, "home")
        self.dh = os.path.join(self.home, ".dhara")
        self.project = os.path.join(self.root, project)
        for name in ("echo-py", "fs-tool", "crash"):
            shutil.copytree(os.path.join(EXTENSIONS, name), os.path.join(self.dh, "extensions", name))
        os.makedirs(os.path.join(self.home, ".ssh"))
        with open(os.path.join(self.home, ".ssh", "id_rsa"), "w") as f:
            f.write("SECRET KEY\n")
        os.makedirs(self.project)
        with open(os.path.join(self.project, "a.txt"), "w") as f:
            f.write("alpha\nbeta\n")
        self.env = {"HOME": self.home, "DHARA_HOME": self.dh, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        if approve_fs:
            self.cli("config", "permissions", "approve", "fs-tool", "filesystem:read")
        proc = subprocess.Popen([DHARA, "serve", "--stdio", *args], cwd=self.project, env=self.env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        super().__init__(proc, lambda: "got %r" % self.buffer)

    def restart(self):
        """Starts the server again, which reads its config anew; then initializes it."""
        self.proc.kill()
        self.proc.wait()
        self.proc = subprocess.Popen([DHARA, "serve", "--stdio"], cwd=self.project, env=self.env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)
        self.buffer = b""
        self.initialize()

    def restart_with_host_client(self):
        """Installs host-client (it makes host API requests) and starts the server again, which
        reads its config anew; then initializes it."""
        shutil.copytree(os.path.join(EXTENSIONS, "host-client"), os.path.join(self.dh, "extensions", "host-client"),
                        dirs_exist_ok=True)
        self.restart()

    def restart_with_quiet(self, manifest, approved=()):
        """Installs `quiet` (QUIET below: tools `look`, `spawn`, `slow` and `secret`, which declare
        no capability) with `manifest` merged in, approves `approved`, and starts the server again."""
        ext = os.path.join(self.dh, "extensions", "quiet")
        os.makedirs(ext)
        with open(os.path.join(ext, "manifest.json"), "w") as f:
            json.dump({"name": "quiet", "version": "1.0.0", "runtime": {"type": "subprocess", "command": "python3 main.py"},
                       **manifest}, f)
        with open(os.path.join(ext, "main.py"), "w") as f:
            f.write(QUIET)
        for capability in approved:
            self.cli("config", "permissions", "approve", "quiet", capability)
        self.restart()

    def host_request(self, method, params, on_question=None, answer="allow"):
        """Has host-client make one host API request, answering `answer` ("allow": this once) to
        every question, after on_question(params) when given; returns (the request's answer, the
        questions' (capability, subject) pairs)."""
        call = self.request("tools/call", {"tool": "host", "input": {"method": method, "params": params}})
        asked = []
        while True:
            m = self.read()
            assert m is not None, ("EOF before the answer", asked)
            if m.get("method") == "approval/request":
                asked.append((m["params"]["capability"], m["params"]["subject"]))
                if on_question:
                    on_question(m["params"])
                self.answer(m, answer)
                continue
            assert m.get("id") == call, m
            assert "result" in m, m
            return json.loads(m["result"]["content"][0]["text"]), asked

    def cli(self, *args):
        out = subprocess.run([DHARA, *args], env=self.env, cwd=self.project, capture_output=True, text=True,
                             start_new_session=True)
        assert out.returncode == 0, out.stderr
        return out.stdout

    def wait_for(self, id_):
        """Reads until the response to `id_`; returns (response, everything read before it)."""
        before = []
        while True:
            m = self.read()
            assert m is not None, ("EOF before the response to", id_, before)
            if m.get("id") == id_ and "method" not in m:
                return m, before
            before.append(m)

    def call(self, method, params=None):
        return self.wait_for(self.request(method, params))[0]

    def initialize(self, **params):
        r = self.call("initialize", {"cwd": self.project, **params})
        assert r["result"]["protocolVersion"] == "0.1.0", r
        return r

    def answer(self, request, decision):
        self.send({"jsonrpc": "2.0", "id": request["id"], "result": {"decision": decision}})

    def exit_code(self, limit=30):
        return self.proc.wait(timeout=limit)

    def audit(self):
        path = os.path.join(self.dh, "audit.jsonl")
        return [json.loads(l) for l in open(path)] if os.path.exists(path) else []

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except OSError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)


def test_initialize_list_call_and_shutdown():
    s = Server()
    try:
        r = s.initialize(sessionId="s-1", clientInfo={"name": "test"})
        assert r["result"]["serverInfo"] == {"name": "dhara", "version": "0.1.0"}, r
        tools = {t["qualifiedName"]: t for t in s.call("tools/list")["result"]["tools"]}
        assert tools["echo-py/echo"]["status"] == "ready" and tools["echo-py/echo"]["extension"] == "echo-py", tools
        assert tools["echo-py/echo"]["parameters"]["required"] == ["text"], tools["echo-py/echo"]
        read = tools["fs-tool/read"]
        assert read["status"] == "blocked" and read["missingCapabilities"] == ["filesystem:read"], read
        assert read["capabilities"] == ["filesystem:read"], read
        assert tools["fs-tool/overreach"]["status"] == "failed" and "process:spawn" in tools["fs-tool/overreach"]["reason"]
        r = s.call("tools/call", {"tool": "echo", "input": {"text": "hi"}, "toolCallId": "c1"})
        assert r["result"] == {"content": [{"type": "text", "text": "hi"}]}, r
        r = s.call("tools/call", {"tool": "echo-py/echo", "input": {"text": "qualified"}})
        assert r["result"]["content"][0]["text"] == "qualified", r
        assert s.call("shutdown") ["result"] == {"status": "ok"}
        assert s.exit_code() == 0
    finally:
        s.close()


def test_calls_sent_together_are_each_answered_once_with_their_own_result():
    # Their results come back in reads of several replies, which reach the server together.
    s = Server()
    try:
        s.initialize()
        calls = [s.request("tools/call", {"tool": "echo", "input": {"text": "t%d" % i}}) for i in range(200)]
        answers = {}
        while len(answers) < len(calls):
            m = s.read()
            assert m is not None, ("EOF after %d of %d answers" % (len(answers), len(calls)))
            assert m.get("id") in calls and m["id"] not in answers, m
            answers[m["id"]] = m
        for i, call in enumerate(calls):
            assert answers[call]["result"]["content"][0]["text"] == "t%d" % i, answers[call]
    finally:
        s.close()


def test_errors_of_section_5():
    s = Server(approve_fs=True)
    try:
        s.initialize()
        r = s.call("tools/call", {"tool": "nope", "input": {}})
        assert r["error"]["code"] == -32601 and "nope" in r["error"]["message"], r
        r = s.call("tools/call", {"tool": "read", "input": {"path": os.path.join(s.home, ".ssh", "id_rsa")}})
        assert r["error"]["code"] == -32002, r
        assert r["error"]["data"]["capability"] == "filesystem:read" and r["error"]["data"]["reason"], r
        r = s.call("tools/call", {"tool": "read", "input": {"path": "a.txt"}})
        assert r["result"]["content"][0]["text"] == "alpha\nbeta\n", r
        r = s.call("tools/call", {"tool": "crash", "input": {}})
        assert r["error"]["code"] == -32003 and r["error"]["data"]["exitCode"] == 3, r
        r = s.call("tools/call", {"tool": "fail", "input": {"message": "boom"}})
        assert r["result"]["isError"] is True and r["result"]["content"][0]["text"] == "boom", r
        r = s.call("tools/call", {"input": {}})
        assert r["error"]["code"] == -32602, r
        r = s.call("tools/frobnicate")
        assert r["error"]["code"] == -32601, r
        s.raw(b"this is not json\n")
        m = s.read()
        assert m["id"] is None and m["error"]["code"] == -32700, m
        s.raw(b'{"jsonrpc": "2.0", "id": 99}\n')
        m = s.read()
        assert m["id"] == 99 and m["error"]["code"] == -32600, m
        # A request refused as a whole is answered with its id when the id can be read, so the
        # client waiting for it hears why (JSON-RPC 2.0 answers null only where it cannot).
        for line, want in ((b'{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": "x"}\n', 6),
                           (b'{"id": "a-7", "method": "tools/list"}\n', "a-7"),
                           (b'{"jsonrpc": "2.0", "id": 8, "method": 5}\n', 8),
                           (b'{"jsonrpc": "2.0", "id": [8], "method": "tools/list"}\n', None),
                           (b'{"jsonrpc": "2.0", "id": 9, "result": 1, "error": {}}\n', None),
                           (b'[{"jsonrpc": "2.0", "id": 10, "method": "tools/list"}]\n', None)):
            s.raw(line)
            m = s.read()
            assert m["id"] == want and m["error"]["code"] == -32600, (line, m)
        # Still serving after all of it; EOF is a shutdown.
        assert s.call("tools/call", {"tool": "echo", "input": {"text": "alive"}})["result"]["content"][0]["text"] == "alive"
        s.proc.stdin.close()
        assert s.exit_code() == 0
    finally:
        s.close()


def test_before_initialize():
    s = Server()
    try:
        r = s.call("tools/list")
        assert r["error"]["code"] == -32600 and "initialize" in r["error"]["message"], r
        r = s.call("initialize", {"cwd": "relative/dir"})
        assert r["error"]["code"] == -32602, r
        r = s.call("initialize", {"mode": "sometimes"})
        assert r["error"]["code"] == -32602, r
        s.initialize()
        r = s.call("initialize", {})
        assert r["error"]["code"] == -32600, r
    finally:
        s.close()


def test_a_pending_capability_is_asked_of_the_client():
    s = Server()
    try:
        s.initialize(sessionId="s-2")
        # allow: this call only, nothing recorded.
        id1 = s.request("tools/call", {"tool": "read", "input": {"path": "a.txt"}, "toolCallId": "r1"})
        q = s.read()
        assert q["method"] == "approval/request", q
        assert q["params"] == {"kind": "capability", "extension": "fs-tool", "tool": "read", "toolCallId": "r1",
                               "capability": "filesystem:read", "subject": "a.txt"}, q
        s.answer(q, "allow")
        r, _ = s.wait_for(id1)
        # Allowed to dhara's check (audited below); fs-tool opens the file itself, which its
        # OS sandbox refuses: the kernel has only what the user approved (a review found the
        # client's answers and pending capabilities reaching the kernel).
        if sandboxed():
            assert r["result"].get("isError") and "Permission denied" in r["result"]["content"][0]["text"], r
        else:
            assert r["result"]["content"][0]["text"] == "alpha\nbeta\n", r
        assert not os.path.exists(os.path.join(s.dh, "permissions.json"))
        # deny: -32002, decided by the user.
        id2 = s.request("tools/call", {"tool": "read", "input": {"path": "a.txt"}})
        s.answer(s.read(), "deny")
        r, _ = s.wait_for(id2)
        assert r["error"]["code"] == -32002 and "denied by the user" in r["error"]["data"]["reason"], r
        # always: allowed for the rest of the session, the next call is not asked about; and
        # never written to permissions.json (a client's message is no lasting approval: it was
        # recorded for good until a review).
        # `always` reaches the kernel too: fs-tool starts again in a profile that has
        # filesystem:read before the call runs, and reads the file itself.
        id3 = s.request("tools/call", {"tool": "read", "input": {"path": "a.txt"}})
        s.answer(s.read(), "always")
        r, _ = s.wait_for(id3)
        assert r["result"]["content"][0]["text"] == "alpha\nbeta\n", r
        assert not os.path.exists(os.path.join(s.dh, "permissions.json"))
        r, before = s.wait_for(s.request("tools/call", {"tool": "read", "input": {"path": "a.txt"}}))
        assert r["result"]["content"][0]["text"] == "alpha\nbeta\n" and before == [], (r, before)
        listed = {t["qualifiedName"]: t for t in s.call("tools/list")["result"]["tools"]}
        assert listed["fs-tool/read"]["status"] == "ready", listed["fs-tool/read"]
        reads = [e for e in s.audit() if e.get("tool") == "read"]
        assert all(e["session"] == "s-2" for e in reads), reads
        decided = [(e["action"], e["decidedBy"]) for e in reads]
        assert decided[:3] == [("allowed", "user"), ("denied", "user"), ("allowed", "user")], decided
        # The call after the `always` was not asked about, and its entry says so (a review: it
        # read as the client's answer).
        assert reads[3]["action"] == "allowed" and reads[3]["decidedBy"] == "user", reads
        assert reads[3].get("reason", "").startswith("not asked: the client answered 'always' for this capability"), reads
    finally:
        s.close()


def test_a_revoke_reaches_the_kernel_through_a_cancelled_call_and_takes_the_environment_too():
    # A call cancelled while the extension waited to start again in its new profile left it
    # waiting for ever in the old one, every later call hanging; and a revoked secrets:env
    # restarted it with every variable still set (a review of the change).
    s = Server()
    try:
        s.env["MYSECRET"] = "hunter2"
        s.restart_with_quiet({"capabilities": ["filesystem:read", "secrets:env"]},
                             approved=("filesystem:read", "secrets:env"))
        call = lambda tool: s.wait_for(s.request("tools/call", {"tool": "quiet/" + tool, "input": {"cwd": s.project}}))[0]
        assert call("look")["result"]["content"][0]["text"].startswith("read: done")
        assert call("secret")["result"]["content"][0]["text"] == "hunter2"
        if not sandboxed():
            print("note: no Landlock here, the kernel side is not tested")
            return
        slow = s.request("tools/call", {"tool": "quiet/slow", "input": {}, "toolCallId": "slow-1"})
        time.sleep(0.3)
        s.cli("config", "permissions", "revoke", "quiet", "filesystem:read")
        time.sleep(1.0)  # the session has read the file: the extension waits for the slow call
        s.send({"jsonrpc": "2.0", "method": "tools/cancel", "params": {"toolCallId": "slow-1"}})
        assert s.wait_for(slow)[0]["error"]["code"] == -32004
        assert call("look")["result"]["content"][0]["text"].startswith("read: PermissionError")
        s.cli("config", "permissions", "revoke", "quiet", "secrets:env")
        within(20, "MYSECRET not gone after the revoke", lambda: call("secret")["result"]["content"][0]["text"] == "None")
    finally:
        s.close()


def test_a_pending_capability_is_not_the_kernels_under_serve():
    # Under serve the kernel had every declared capability not denied: an extension read and
    # wrote the project and connected out through a tool declaring none, never asked about, and
    # wrote a file itself after the client denied the write (a review, 2026-12-07).
    s = Server()
    try:
        s.restart_with_quiet({"capabilities": ["filesystem:read", "filesystem:write"]})
        r, asked = s.wait_for(s.request("tools/call", {"tool": "quiet/look", "input": {"cwd": s.project}}))
        assert asked == [], asked  # a tool of no capability is not asked about
        text = r["result"]["content"][0]["text"]
        if not sandboxed():
            print("note: no Landlock here, the kernel side is not tested")
            return
        assert text == "read: PermissionError; write: OSError", r  # EACCES, EROFS
        assert not os.path.exists(os.path.join(s.project, "b.txt"))
    finally:
        s.close()


def test_a_revoked_capability_leaves_the_kernel_too():
    # A revoke reached dhara's checks only: the extension's own reads and connects went on
    # for the rest of the session, also after a crash's restart (a review). It starts again
    # in a profile without the capability now, once its calls in flight have ended.
    s = Server()
    try:
        s.restart_with_quiet({"capabilities": ["filesystem:read", "filesystem:write", "process:spawn"],
                              "process": {"commands": ["cat"]}}, approved=("filesystem:read", "process:spawn"))
        spawned = lambda: s.wait_for(s.request("tools/call", {"tool": "quiet/spawn", "input": {"cwd": s.project}}))[0]
        look = lambda: s.wait_for(s.request("tools/call", {"tool": "quiet/look", "input": {"cwd": s.project}}))[0]
        assert look()["result"]["content"][0]["text"].startswith("read: done"), "approved: read"
        assert spawned()["result"]["content"][0]["text"] == "alpha\nbeta\n", "approved: a spawn reads"
        if not sandboxed():
            print("note: no Landlock here, the kernel side is not tested")
            return
        s.cli("config", "permissions", "revoke", "quiet", "filesystem:read")
        within(20, "still reading after the revoke",
               lambda: look()["result"]["content"][0]["text"].startswith("read: PermissionError"))
        # A program it has dhara spawn is confined as it is now, not as it was at the start.
        assert "alpha" not in spawned()["result"]["content"][0]["text"]
        # And an approval given meanwhile reaches it the same way.
        s.cli("config", "permissions", "approve", "quiet", "filesystem:read")
        within(20, "not reading after the approval", lambda: look()["result"]["content"][0]["text"].startswith("read: done"))
    finally:
        s.close()


def test_a_spawn_running_when_the_profile_changes_ends():
    # A spawn kept the profile it started in: after a revoke of filesystem:write it went on
    # writing the project until its own timeout, up to 24 h (a review). The extension's spawns
    # end when its profile loses a capability, as the extension itself starts again in the new
    # one; a change that only adds leaves them.
    if not sandboxed():
        print("note: no Landlock here, no profile to change")
        return
    s = Server()
    lingering = lambda: [p for p in os.listdir("/proc") if p.isdigit() and b"46.7788" in cmdline_of(p)]
    look = lambda: s.wait_for(s.request("tools/call", {"tool": "quiet/look", "input": {"cwd": s.project}}))[0]
    try:
        s.restart_with_quiet({"capabilities": ["filesystem:read", "filesystem:write", "process:spawn"],
                              "process": {"commands": ["sleep"]}}, approved=("filesystem:read", "process:spawn"))
        r = s.wait_for(s.request("tools/call", {"tool": "quiet/linger", "input": {}}))[0]
        assert r["result"]["content"][0]["text"] == "sent", r
        within(20, "the spawn never started", lambda: bool(lingering()))
        # A change that only adds leaves it running (a review: an approval killed a running build).
        s.cli("config", "permissions", "approve", "quiet", "filesystem:write")
        within(20, "the extension not writing after the approval", lambda: "write: done" in look()["result"]["content"][0]["text"])
        assert lingering(), "a change that only added ended the spawn"
        s.cli("config", "permissions", "revoke", "quiet", "filesystem:read")
        within(20, "the spawn outlived the change of its extension's profile", lambda: not lingering())
    finally:
        for p in lingering():
            try:
                os.kill(int(p), signal.SIGKILL)
            except OSError:
                pass
        s.close()


def cmdline_of(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


QUIET = r'''
import json, os, sys
slow = {}
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
for raw in sys.stdin:
    m = json.loads(raw)
    if "id" not in m or "method" not in m:
        continue
    if m["method"] == "initialize":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": "0.1.0", "name": "quiet", "version": "1.0.0",
              "tools": [{"name": "look", "description": "reads a.txt itself", "inputSchema": {"type": "object"},
                         "capabilities": []},
                        {"name": "spawn", "description": "has dhara spawn cat a.txt", "inputSchema": {"type": "object"},
                         "capabilities": []},
                        {"name": "slow", "description": "answers once cancelled", "inputSchema": {"type": "object"},
                         "capabilities": []},
                        {"name": "secret", "description": "MYSECRET from its environment",
                         "inputSchema": {"type": "object"}, "capabilities": []},
                        {"name": "linger", "description": "has dhara spawn a long sleep, answers at once",
                         "inputSchema": {"type": "object"}, "capabilities": []}]}})
    elif m["method"] == "tools/execute" and m["params"].get("toolName") == "linger":
        send({"jsonrpc": "2.0", "id": "l1", "method": "host/process/spawn",
              "params": {"argv": ["sleep", "46.7788"], "timeoutMs": 600000}})
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"content": [{"type": "text", "text": "sent"}]}})
    elif m["method"] == "tools/execute" and m["params"].get("toolName") == "slow":
        slow[m["params"]["toolCallId"]] = m["id"]  # answered when cancelled
    elif m["method"] == "tools/cancel":
        if (i := slow.pop(m["params"]["toolCallId"], None)) is not None:
            send({"jsonrpc": "2.0", "id": i, "error": {"code": -32004, "message": "cancelled"}})
    elif m["method"] == "tools/execute" and m["params"].get("toolName") == "secret":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"content": [{"type": "text",
              "text": str(os.environ.get("MYSECRET"))}]}})
    elif m["method"] == "tools/execute" and m["params"].get("toolName") == "spawn":
        # host/process/spawn of `cat a.txt`: the program runs in this extension's sandbox.
        cwd = m["params"]["input"]["cwd"]
        send({"jsonrpc": "2.0", "id": "h1", "method": "host/process/spawn", "params": {"argv": ["cat", cwd + "/a.txt"]}})
        for raw2 in sys.stdin:
            a = json.loads(raw2)
            if a.get("id") == "h1":
                break
        out = a.get("result", {}).get("stdout", "") if "result" in a else json.dumps(a.get("error"))
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"content": [{"type": "text", "text": out}]}})
    elif m["method"] == "tools/execute":
        cwd = m["params"]["input"]["cwd"]
        said = []
        for what, act in (("read", lambda: open(cwd + "/a.txt").read()), ("write", lambda: open(cwd + "/b.txt", "w").write("x"))):
            try:
                act()
                said.append(what + ": done")
            except OSError as e:
                said.append(what + ": " + type(e).__name__)
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"content": [{"type": "text", "text": "; ".join(said)}]}})
    elif m["method"] == "shutdown":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"status": "ok"}})
        break
'''


def within(limit, what, done, pause=0.1):
    """Calls done() until it returns true; fails naming `what` after `limit` seconds."""
    deadline = time.monotonic() + limit
    while not done():
        assert time.monotonic() < deadline, f"{what} within {limit} s"
        time.sleep(pause)


def sandboxed():
    """Whether this kernel has Landlock (extensions then run in their OS sandbox)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc.syscall(ctypes.c_long(444), None, ctypes.c_long(0), ctypes.c_long(1)) > 0


def test_the_users_mode_stands_against_the_clients():
    # `dhara serve --mode approve` with a client initializing `mode: auto`: every call ran
    # without a question (the client's mode won; a review). The user's mode stands now.
    s = Server(approve_fs=True, args=("--mode", "approve"))
    try:
        r = s.initialize(mode="auto")
        assert "mode 'auto' ignored: dhara serve was started with --mode approve, which stands" in r["result"]["warnings"], r
        id1 = s.request("tools/call", {"tool": "echo", "input": {"text": "hi"}})
        q = s.read()
        assert q.get("method") == "approval/request" and q["params"]["kind"] == "tool", q
        s.answer(q, "allow")
        assert s.wait_for(id1)[0]["result"]["content"][0]["text"] == "hi"
    finally:
        s.close()


def test_approve_mode_asks_before_each_call():
    s = Server(approve_fs=True)
    try:
        s.initialize(mode="approve")
        id1 = s.request("tools/call", {"tool": "read", "input": {"path": "a.txt"}, "toolCallId": "t1"})
        q = s.read()
        assert q["params"]["kind"] == "tool" and q["params"]["subject"] == "a.txt (2 lines)", q
        assert q["params"]["capability"] is None and q["params"]["tool"] == "read", q
        s.answer(q, "deny")
        r, _ = s.wait_for(id1)
        assert r["result"] == {"content": [{"type": "text", "text": "rejected by user"}], "isError": True}, r
        id2 = s.request("tools/call", {"tool": "echo", "input": {"text": "yes"}})
        s.answer(s.read(), "always")  # this tool, for the rest of the session
        assert s.wait_for(id2)[0]["result"]["content"][0]["text"] == "yes"
        r, before = s.wait_for(s.request("tools/call", {"tool": "echo", "input": {"text": "again"}}))
        assert before == [] and r["result"]["content"][0]["text"] == "again", (r, before)
        rejected = [e for e in s.audit() if e["details"].get("prompt") == "approve" and e["action"] == "denied"]
        assert len(rejected) == 1 and rejected[0]["reason"] == "rejected by user", s.audit()
        # quit: in-flight calls are cancelled and the server exits 130.
        sleeping = s.request("tools/call", {"tool": "sleep", "input": {"ms": 60000}})
        s.answer(s.read(), "allow")
        id4 = s.request("tools/call", {"tool": "read", "input": {"path": "a.txt"}})
        q = s.read()
        assert q["method"] == "approval/request", q
        s.answer(q, "quit")
        assert s.exit_code() == 130
        left = []
        while (m := s.read()) is not None:
            left.append(m)
        by_id = {m.get("id"): m for m in left}
        assert by_id[id4]["error"]["code"] == -32004, left
        assert sleeping not in by_id or by_id[sleeping]["error"]["code"] == -32004, left
    finally:
        s.close()


def test_a_call_cancelled_while_its_question_is_open_is_cancelled_not_rejected():
    # A review: tools/cancel while the approval/request was open answered the call with a
    # rejection result and audited it as the user's "no"; nobody answered. It is -32004 now,
    # with nothing audited as the human's decision, in approve and in review mode.
    for mode, tool_input in (("approve", {"text": "x"}), ("review", {"text": "y"})):
        s = Server(approve_fs=True, args=("--mode", mode))
        try:
            s.initialize()
            id1 = s.request("tools/call", {"tool": "echo", "input": tool_input, "toolCallId": "c1"})
            q = s.read()
            assert q["method"] == "approval/request", q
            s.send({"jsonrpc": "2.0", "method": "tools/cancel", "params": {"toolCallId": "c1"}})
            r, _ = s.wait_for(id1)
            assert r["error"]["code"] == -32004 and "question was open" in r["error"]["message"], (mode, r)
            assert [e for e in s.audit() if "prompt" in e["details"]] == [], (mode, s.audit())
            # The next call is asked about and answered as usual.
            id2 = s.request("tools/call", {"tool": "echo", "input": {"text": "next"}})
            s.answer(s.read(), "allow")
            assert s.wait_for(id2)[0]["result"]["content"][0]["text"] == "next", mode
        finally:
            s.close()


def test_a_call_let_through_by_an_earlier_always_is_audited_as_not_asked():
    # A review: the calls an "always" let through were audited exactly as the client's yes to
    # each of them; a reader could not tell what the user saw from what nobody was asked about.
    s = Server(approve_fs=True)
    try:
        s.initialize(mode="approve")
        id1 = s.request("tools/call", {"tool": "echo", "input": {"text": "first"}})
        s.answer(s.read(), "always")
        assert s.wait_for(id1)[0]["result"]["content"][0]["text"] == "first"
        r, before = s.wait_for(s.request("tools/call", {"tool": "echo", "input": {"text": "second"}}))
        assert before == [] and r["result"]["content"][0]["text"] == "second", (r, before)
        answers = [(e["details"]["subject"], e["action"], e.get("reason")) for e in s.audit() if "prompt" in e["details"]]
        assert answers == [("text=first", "allowed", None),
                           ("text=second", "allowed",
                            "not asked: the client answered 'always' for this tool earlier in the session")], answers
    finally:
        s.close()


def test_review_mode_sends_the_result():
    s = Server(args=("--mode", "review"))
    try:
        s.initialize()
        id1 = s.request("tools/call", {"tool": "echo", "input": {"text": "look at me"}})
        q = s.read()
        assert q["params"]["kind"] == "result", q
        assert q["params"]["result"] == {"content": [{"type": "text", "text": "look at me"}]}, q
        s.answer(q, "deny")
        r, _ = s.wait_for(id1)
        assert r["result"]["isError"] is True and r["result"]["content"][0]["text"] == "result rejected by reviewer", r
        id2 = s.request("tools/call", {"tool": "echo", "input": {"text": "fine"}})
        s.answer(s.read(), "allow")
        assert s.wait_for(id2)[0]["result"]["content"][0]["text"] == "fine"
        # An answer that is not a decision is no answer: fail closed.
        id3 = s.request("tools/call", {"tool": "echo", "input": {"text": "x"}})
        q = s.read()
        s.send({"jsonrpc": "2.0", "id": q["id"], "result": {"decision": "maybe"}})
        r, _ = s.wait_for(id3)
        assert r["result"]["isError"] is True and "rejected" in r["result"]["content"][0]["text"], r
    finally:
        s.close()


def test_progress_and_cancel():
    s = Server()
    try:
        s.initialize()
        r, before = s.wait_for(s.request("tools/call", {"tool": "progress", "input": {"count": 3}, "toolCallId": "p1"}))
        notes = [m for m in before if m.get("method") == "tools/progress"]
        assert [n["params"]["update"]["progress"] for n in notes] == [1, 2, 3], before
        assert all(n["params"]["toolCallId"] == "p1" for n in notes), notes
        assert "result" in r, r
        sleeping = s.request("tools/call", {"tool": "sleep", "input": {"ms": 60000}, "toolCallId": "z"})
        dup = s.call("tools/call", {"tool": "echo", "input": {"text": "x"}, "toolCallId": "z"})
        assert dup["error"]["code"] == -32602, dup
        s.send({"jsonrpc": "2.0", "method": "tools/cancel", "params": {"toolCallId": "z"}})
        r, _ = s.wait_for(sleeping)
        assert r["error"]["code"] == -32004, r
        # As a request, tools/cancel is answered {}.
        assert s.call("tools/cancel", {"toolCallId": "nothing"})["result"] == {}
        # A toolCallId that is not a non-empty string cancels nothing (read as "none", a
        # malformed cancel of one call cancelled every call in flight; a review); as a request
        # it is -32602. An empty toolCallId is refused at tools/call too.
        sleeping = s.request("tools/call", {"tool": "sleep", "input": {"ms": 1500}, "toolCallId": "w"})
        for bad in (7, "", None, ["w"]):
            s.send({"jsonrpc": "2.0", "method": "tools/cancel", "params": {"toolCallId": bad}})
            assert s.call("tools/cancel", {"toolCallId": bad})["error"]["code"] == -32602, bad
        r, _ = s.wait_for(sleeping)
        assert r["result"]["content"][0]["text"] == "slept 1500 ms", r
        empty = s.call("tools/call", {"tool": "echo", "input": {"text": "x"}, "toolCallId": ""})
        assert empty["error"]["code"] == -32602, empty
    finally:
        s.close()


def test_no_prompt_denies_pending_capabilities_without_asking():
    s = Server(args=())
    s.proc.kill()
    s.proc.wait()
    s.proc = subprocess.Popen([DHARA, "--no-prompt", "serve", "--stdio"], cwd=s.project, env=s.env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              start_new_session=True)
    try:
        s.initialize()
        r, before = s.wait_for(s.request("tools/call", {"tool": "read", "input": {"path": "a.txt"}}))
        assert before == [] and r["error"]["code"] == -32002, (r, before)
        assert "dhara config permissions approve fs-tool" in r["error"]["data"]["reason"], r
    finally:
        s.close()


def sanitized(pid):
    """Whether the dhara process runs under a sanitizer (its runtime library is mapped)."""
    with open(f"/proc/{pid}/maps") as f:
        return any(lib in line for line in f for lib in ("libasan", "libtsan", "libubsan"))


def test_a_client_that_stops_reading_holds_dhara_to_bounded_memory_and_loses_nothing():
    # A client that sent big calls and read none of the answers took dhara to 1.85 GB (2 000
    # calls of 1 MB, a review): dhara took every request while the answers piled up. Now a
    # call waits in dhara's reader while 32 MiB of requests are in hand or 32 MiB of answers
    # wait unread, up to 64 MiB of calls; one beyond those is answered busy. Every call is
    # answered once, and the input is never left unread (the writer never blocks for good).
    import threading
    s = Server()
    try:
        s.initialize()
        calls, text = 400, "x" * (1 << 20)
        ids = []

        def write_all():
            for _ in range(calls):
                ids.append(s.request("tools/call", {"tool": "echo", "input": {"text": text}}))
        writer = threading.Thread(target=write_all, daemon=True)
        writer.start()
        writer.join(timeout=60)
        assert not writer.is_alive(), f"dhara stopped reading its input after {len(ids)} calls"
        hwm_unread = harness.vm_hwm_kib(s.proc.pid)
        results, busy = set(), set()
        while len(results) + len(busy) < calls:
            m = s.read(limit=60)
            assert m is not None and m.get("id") not in results | busy, m and m.get("id")
            if "result" in m:
                assert m["result"]["content"][0]["text"] == text, m["id"]
                results.add(m["id"])
            else:
                assert m["error"]["code"] == -32000 and m["error"]["data"] == {"reason": "busy"}, m["error"]
                assert "send this call again once answers arrive" in m["error"]["message"], m["error"]
                busy.add(m["id"])
        assert results | busy == set(ids) and len(results) >= 32, (len(results), len(busy))
        hwm = harness.vm_hwm_kib(s.proc.pid)
        print(f"     {calls} calls of 1 MiB, none read while sent: {len(results)} answered, {len(busy)} busy; "
              f"VmHWM {hwm_unread // 1024} MiB, at the end {hwm // 1024} MiB")
        # Under AddressSanitizer every allocation costs shadow memory and freed ones wait in a
        # 256 MiB quarantine: its RSS is about three times a release build's (593 MiB there).
        cap = 1536 if sanitized(s.proc.pid) else 512
        assert hwm < cap * 1024, f"dhara's peak RSS {hwm // 1024} MiB for {calls} calls of 1 MiB (cap {cap} MiB)"
    finally:
        s.close()


def test_an_approval_answered_behind_a_full_pipe_is_read():
    # With dhara no longer reading while answers were unread, a client that reads slowly on one
    # thread and writes on another hung for good once it answered an approval request: its
    # answer sat behind calls in a full pipe (a review). The input is always read now.
    import threading
    s = Server()
    try:
        s.initialize()
        lock, text, ids = threading.Lock(), "y" * (1 << 20), {}

        def send(message):
            # The writer holds the lock while blocked in a full pipe: with dhara not reading, the
            # answer below never went out (the test fails here rather than hang).
            assert lock.acquire(timeout=30), "the writer is stuck: dhara stopped reading its input"
            try:
                s.send(message)
            finally:
                lock.release()

        def write_all():
            for i in range(120):
                method = "tools/call"
                if i == 44:
                    ids["read"] = "read-call"
                    send({"jsonrpc": "2.0", "id": "read-call", "method": method,
                          "params": {"tool": "read", "input": {"path": "a.txt"}}})
                send({"jsonrpc": "2.0", "id": i, "method": method, "params": {"tool": "echo", "input": {"text": text}}})
        writer = threading.Thread(target=write_all, daemon=True)
        writer.start()
        answered, read_answer = set(), None
        while len(answered) < 121:
            m = s.read(limit=60)
            assert m is not None, len(answered)
            if m.get("method") == "approval/request":
                time.sleep(0.05)
                send({"jsonrpc": "2.0", "id": m["id"], "result": {"decision": "allow"}})
                continue
            time.sleep(0.02)  # a slow reader
            assert m["id"] not in answered, m["id"]
            answered.add(m["id"])
            if m["id"] == "read-call":
                read_answer = m
        writer.join(timeout=10)
        # Allowed to dhara's check (the file's own open is the sandbox's: approved only).
        text = read_answer["result"]["content"][0]["text"]
        assert text == "alpha\nbeta\n" or "Permission denied" in text, read_answer
    finally:
        s.close()


def test_a_cancel_reaches_calls_that_wait_for_room():
    # While 32 MiB of requests were in hand dhara read nothing: a cancel or a shutdown waited
    # for a call to end (29 s in a review). Calls waiting for room are answered cancelled at
    # once, as the calls in flight are.
    s = Server()
    try:
        s.initialize()
        pad = "p" * (7 << 20)
        ids = [s.request("tools/call", {"tool": "sleep", "input": {"ms": 30000, "pad": pad}}) for _ in range(6)]
        started = time.monotonic()
        s.send({"jsonrpc": "2.0", "method": "tools/cancel", "params": {}})
        shutdown = s.request("shutdown")
        got = {}
        while len(got) < 7:
            m = s.read(limit=20)
            assert m is not None and "method" not in m, m
            got[m["id"]] = m
        assert time.monotonic() - started < 15, "the cancel waited for a call to end"
        for i in ids:
            assert got[i]["error"]["code"] == -32004, got[i]
        assert got[shutdown]["result"] == {"status": "ok"}, got[shutdown]
        assert s.exit_code() == 0
    finally:
        s.close()


def test_eof_and_shutdown_answer_the_calls_in_flight_first():
    s = Server()
    try:
        s.initialize()
        slow = s.request("tools/call", {"tool": "sleep", "input": {"ms": 300}})
        s.proc.stdin.close()  # EOF is a shutdown, but the call in flight is answered first
        r, _ = s.wait_for(slow)
        assert r["result"]["content"][0]["text"] == "slept 300 ms", r
        assert s.read() is None and s.exit_code() == 0
    finally:
        s.close()
    s = Server()
    try:
        s.initialize()
        slow = s.request("tools/call", {"tool": "sleep", "input": {"ms": 300}})
        bye = s.request("shutdown")
        late = s.call("tools/call", {"tool": "echo", "input": {"text": "too late"}})
        assert late["error"]["code"] == -32600 and "shutting down" in late["error"]["message"], late
        r, before = s.wait_for(bye)
        assert r["result"] == {"status": "ok"}, r
        assert [m["id"] for m in before] == [slow] and "result" in before[0], before  # the call, then the shutdown
        assert s.exit_code() == 0
    finally:
        s.close()


def test_ctrl_c_cancels_the_calls_in_flight_and_exits_130():
    s = Server()
    try:
        s.initialize()
        s.request("tools/call", {"tool": "sleep", "input": {"ms": 60000}, "toolCallId": "long"})
        assert s.call("tools/list")["result"]["tools"]  # the call was read before the signal
        s.proc.send_signal(signal.SIGINT)
        assert s.exit_code() == 130
        assert harness.gone_from(os.path.join(s.dh, "extensions")), "an extension was left running"
    finally:
        s.close()


def test_a_host_request_allowed_once_reads_beneath_its_allowed_root():
    s = Server()
    try:
        s.restart_with_host_client()
        answer, asked = s.host_request("host/fs/read", {"path": "a.txt"})  # allowed this once: nothing is recorded
        # The tool's four capabilities, then the host request's own path check.
        assert asked[-1][0] == "filesystem:read" and asked[-1][1].endswith("a.txt"), asked
        assert answer["result"]["content"] == "alpha\nbeta\n", answer
        assert not os.path.exists(os.path.join(s.dh, "permissions.json"))
    finally:
        s.close()


def test_a_host_read_never_reaches_a_denied_file_through_a_link_moved_while_the_human_thought():
    """The read of lib/key.txt (lib -> src) is asked about. While the user is asked, lib is made
    a link to a denied folder beneath the same allowed root. The answer allow does not reach the
    denied file: the check is decided again when the answer comes, and refuses it."""
    s = Server()
    try:
        for folder, text in (("src", "checked\n"), ("private", "PRIVATE\n")):
            os.makedirs(os.path.join(s.project, folder))
            with open(os.path.join(s.project, folder, "key.txt"), "w") as f:
                f.write(text)
        lib = os.path.join(s.project, "lib")
        os.symlink("src", lib)
        s.cli("config", "set", "security.deniedPaths", json.dumps([os.path.join(s.project, "private")]))
        s.restart_with_host_client()
        swapped = []

        def swap(question):
            if question["capability"] == "filesystem:read" and question["subject"].endswith("lib/key.txt"):
                os.remove(lib)
                os.symlink("private", lib)  # denied, beneath the same allowed root
                swapped.append(True)

        answer, _ = s.host_request("host/fs/read", {"path": "lib/key.txt"}, on_question=swap)
        assert swapped, "the read's own path check was never asked about"
        assert "PRIVATE" not in json.dumps(answer), answer
        assert "result" not in answer, answer
        assert "checked again when the user answered" in json.dumps(answer), answer
        assert "private" in json.dumps(answer), answer  # the reason names where the path leads now
    finally:
        s.close()


def test_a_host_read_refuses_a_denied_folder_whose_parent_was_renamed():
    """a/private is denied when the session starts; then a is renamed z. The rules name paths,
    so the check of z/private/key allows it, but the read knows the folder by its identity."""
    s = Server()
    try:
        os.makedirs(os.path.join(s.project, "a", "private"))
        with open(os.path.join(s.project, "a", "private", "key"), "w") as f:
            f.write("PRIVATE\n")
        with open(os.path.join(s.project, "a", "open.txt"), "w") as f:
            f.write("open\n")
        s.cli("config", "set", "security.deniedPaths", json.dumps([os.path.join(s.project, "a", "private")]))
        s.restart_with_host_client()
        os.rename(os.path.join(s.project, "a"), os.path.join(s.project, "z"))
        refused, _ = s.host_request("host/fs/read", {"path": "z/private/key"})
        assert "PRIVATE" not in json.dumps(refused), refused
        assert "lies in a folder the rules deny" in json.dumps(refused), refused
        beside, _ = s.host_request("host/fs/read", {"path": "z/open.txt"})
        assert beside["result"]["content"] == "open\n", beside
    finally:
        s.close()


def test_a_renamed_denied_folder_stays_refused_after_the_rules_are_compiled_again():
    """As above, but the user then approves the read with `dhara config permissions approve`,
    so the session compiles the rules again while a/private names a new folder, or nothing
    that resolves: the folder the entry named before is still held, and stays refused."""
    for way in ("a new folder", "a symlink loop"):
        s = Server()
        try:
            os.makedirs(os.path.join(s.project, "a", "private"))
            with open(os.path.join(s.project, "a", "private", "key"), "w") as f:
                f.write("PRIVATE\n")
            s.cli("config", "set", "security.deniedPaths", json.dumps([os.path.join(s.project, "a", "private")]))
            s.restart_with_host_client()
            os.rename(os.path.join(s.project, "a"), os.path.join(s.project, "z"))
            if way == "a new folder":
                os.makedirs(os.path.join(s.project, "a", "private"))
            else:
                os.symlink("a", os.path.join(s.project, "a"))
            refused, asked = s.host_request("host/fs/read", {"path": "z/private/key"}, answer="allow")
            assert ("filesystem:read", "z/private/key") in asked, (way, asked)
            assert "PRIVATE" not in json.dumps(refused), (way, refused)
            assert "lies in a folder the rules deny" in json.dumps(refused), (way, refused)
            s.cli("config", "permissions", "approve", "host-client", "filesystem:read")
            # The session reads permissions.json again and compiles the rules anew: until then
            # it asks (answered no), after it the read is checked under the new rules alone.
            deadline = time.monotonic() + 20
            while True:
                again, asked = s.host_request("host/fs/read", {"path": "z/private/key"}, answer="deny")
                assert "PRIVATE" not in json.dumps(again), (way, again)
                if not asked or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert asked == [], (way, "the approval never reached the session")
            assert "lies in a folder the rules deny" in json.dumps(again), (way, again)
        finally:
            s.close()


def test_host_file_operations_use_single_file_and_glob_allowed_entries():
    """allowedPaths may name one file or a glob outside the project; host reads and writes of
    what they allow work, and nothing beside them."""
    s = Server()
    try:
        shared = os.path.join(s.root, "shared")
        os.makedirs(os.path.join(shared, "guide"))
        notes = os.path.join(s.root, "notes.txt")
        with open(notes, "w") as f:
            f.write("notes\n")
        with open(os.path.join(shared, "guide", "a.md"), "w") as f:
            f.write("guide\n")
        with open(os.path.join(shared, "guide", "a.txt"), "w") as f:
            f.write("not markdown\n")
        s.cli("config", "set", "security.allowedPaths", json.dumps([notes, os.path.join(shared, "**", "*.md")]))
        s.restart_with_host_client()
        read, _ = s.host_request("host/fs/read", {"path": notes})
        assert read["result"]["content"] == "notes\n", read
        wrote, _ = s.host_request("host/fs/write", {"path": notes, "content": "edited\n"})
        assert wrote["result"]["bytesWritten"] == 7, wrote
        assert open(notes).read() == "edited\n"
        md, _ = s.host_request("host/fs/read", {"path": os.path.join(shared, "guide", "a.md")})
        assert md["result"]["content"] == "guide\n", md
        txt, _ = s.host_request("host/fs/read", {"path": os.path.join(shared, "guide", "a.txt")})
        assert txt["error"]["code"] == -32002, txt  # not what the glob allows
        beside, _ = s.host_request("host/fs/read", {"path": os.path.join(s.root, "other.txt")})
        assert beside["error"]["code"] == -32002, beside
    finally:
        s.close()


def test_names_holding_glob_characters_stay_denied():
    """A project named `app[2]`: its own config is still refused (the built-in denial takes the
    folder literally), and a deniedPaths entry `secrets[old]` refuses the folder of that name
    (it used to be read as a glob only)."""
    s = Server(project="app[2]")
    try:
        os.makedirs(os.path.join(s.project, ".dhara"))
        config = os.path.join(s.project, ".dhara", "config.json")
        with open(config, "w") as f:
            f.write("{}\n")
        os.makedirs(os.path.join(s.project, "secrets[old]"))
        with open(os.path.join(s.project, "secrets[old]", "key"), "w") as f:
            f.write("PRIVATE\n")
        s.cli("config", "set", "security.allowedPaths", json.dumps([s.root]))
        s.cli("config", "set", "security.deniedPaths", json.dumps([os.path.join(s.project, "secrets[old]")]))
        s.restart_with_host_client()
        wrote, _ = s.host_request("host/fs/write", {"path": ".dhara/config.json", "content": '{"security": {}}'})
        assert wrote["error"]["code"] == -32002, wrote
        assert wrote["error"]["message"].endswith("is denied by the rule built-in: <project>/.dhara"), wrote
        assert open(config).read() == "{}\n"
        read, _ = s.host_request("host/fs/read", {"path": "secrets[old]/key"})
        assert read["error"]["code"] == -32002 and "PRIVATE" not in json.dumps(read), read
        assert "is denied by the rule " + os.path.join(s.project, "secrets[old]") in read["error"]["message"], read
        ok, _ = s.host_request("host/fs/read", {"path": "a.txt"})
        assert ok["result"]["content"] == "alpha\nbeta\n", ok
    finally:
        s.close()


def test_a_project_named_with_glob_characters_is_allowed_by_name():
    """The default allowedPaths entry is the project root escaped (`app\\[2]`): a project named
    `app[2]` is allowed, its sibling `app2` is not (read as a glob, the root allowed `app2` and
    nothing of the project), and a project file's relative entry narrows inside it."""
    s = Server(project="app[2]")
    try:
        sibling = os.path.join(s.root, "app2")
        os.makedirs(sibling)
        with open(os.path.join(sibling, "x.txt"), "w") as f:
            f.write("SIBLING\n")
        os.makedirs(os.path.join(s.project, "src"))
        with open(os.path.join(s.project, "src", "f.txt"), "w") as f:
            f.write("source\n")
        assert json.loads(s.cli("config", "get", "security.allowedPaths")) == [s.project.replace("[", "\\[")]
        s.restart_with_host_client()
        ok, _ = s.host_request("host/fs/read", {"path": "a.txt"})
        assert ok["result"]["content"] == "alpha\nbeta\n", ok
        wrote, _ = s.host_request("host/fs/write", {"path": "src/new.txt", "content": "new\n"})
        assert "error" not in wrote, wrote
        assert open(os.path.join(s.project, "src", "new.txt")).read() == "new\n"
        far, _ = s.host_request("host/fs/read", {"path": os.path.join(sibling, "x.txt")})
        assert far["error"]["code"] == -32002 and "SIBLING" not in json.dumps(far), far
        assert "outside the allowed paths" in far["error"]["message"], far
        os.makedirs(os.path.join(s.project, ".dhara"))
        with open(os.path.join(s.project, ".dhara", "config.json"), "w") as f:
            json.dump({"security": {"allowedPaths": ["src"]}}, f)
        assert json.loads(s.cli("config", "get", "security.allowedPaths")) == [
            s.project.replace("[", "\\[") + "/src"]
        s.restart_with_host_client()
        inside, _ = s.host_request("host/fs/read", {"path": "src/f.txt"})
        assert inside["result"]["content"] == "source\n", inside
        narrowed, _ = s.host_request("host/fs/read", {"path": "a.txt"})
        assert narrowed["error"]["code"] == -32002 and "outside the allowed paths" in narrowed["error"]["message"], narrowed
    finally:
        s.close()



def test_large_host_reads_at_once_are_taken_in_turn_and_an_answer_too_large_in_text_says_so():
    """Four base64 reads of 16 MiB files asked at once (89 MB of answers) used to pass the
    64 MiB the extension's input may hold, and the extension was stopped for not reading; a text
    read of a 12 MiB file of control characters (72 MB in JSON) too. The answers now wait their
    turn, an answer over 24 MiB says to read in base64, and more than may wait is refused for
    the extension to ask again: it is never stopped."""
    s = Server()
    try:
        s.restart_with_host_client()
        size = 16 << 20
        for i in range(6):
            with open(os.path.join(s.project, f"big{i}.bin"), "wb") as f:
                f.write(os.urandom(size))
        with open(os.path.join(s.project, "control.txt"), "wb") as f:
            f.write(b"\x01" * (12 << 20))

        def at_once(requests):
            call = s.request("tools/call", {"tool": "host", "input": {"requests": requests}})
            while True:
                m = s.read()
                assert m is not None, "EOF before the answer"
                if m.get("method") == "approval/request":
                    s.answer(m, "allow")
                    continue
                assert m.get("id") == call and "result" in m, m
                return json.loads(m["result"]["content"][0]["text"])

        def reads(count):
            return at_once([{"method": "host/fs/read", "params": {"path": f"big{i}.bin", "encoding": "base64"}}
                            for i in range(count)])

        b64 = 4 * ((size + 2) // 3)
        assert reads(4) == [{"contentLength": b64}] * 4
        six = reads(6)
        read = [a for a in six if a == {"contentLength": b64}]
        refused = [a for a in six if a != {"contentLength": b64}]
        assert len(read) >= 4, six
        for a in refused:
            assert a["error"]["code"] == -32001 and "ask again" in a["error"]["message"], a
        text, _ = s.host_request("host/fs/read", {"path": "control.txt"})
        assert text["error"]["code"] == -32001 and 'encoding "base64"' in text["error"]["message"], text
        assert text["error"]["data"]["answerBytes"] > 24 << 20, text
        as_b64 = at_once([{"method": "host/fs/read", "params": {"path": "control.txt", "encoding": "base64"}}])
        assert as_b64 == [{"contentLength": 4 * (((12 << 20) + 2) // 3)}], as_b64
    finally:
        s.close()


def test_an_extension_that_asks_for_large_reads_and_stops_reading_is_stopped():
    """Host answers wait in dhara while the extension's input is full; one that asked for them
    and never reads again held dhara at ~316 MB for ever (a review). After 30 s without one of
    them going out it is stopped for not reading its input."""
    s = Server()
    try:
        s.restart_with_host_client()
        for i in range(4):
            with open(os.path.join(s.project, f"big{i}.bin"), "wb") as f:
                f.write(os.urandom(16 << 20))
        reads = [{"method": "host/fs/read", "params": {"path": f"big{i}.bin", "encoding": "base64"}} for i in range(4)]
        call = s.request("tools/call", {"tool": "host", "input": {"requests": reads, "stall": True}})
        started = time.monotonic()
        while True:
            m = s.read(limit=90)
            assert m is not None, "no answer within 90 s"
            if m.get("method") == "approval/request":
                s.answer(m, "allow")
                continue
            break
        waited = time.monotonic() - started
        assert m.get("id") == call and m["error"]["code"] == -32003, m
        assert "host answers it asked for waited 30 s" in m["error"]["message"], m["error"]
        assert waited >= 29, waited
        print(f"     stopped {waited:.1f} s after it asked")
    finally:
        s.close()


def test_denied_host_requests_cannot_fill_the_trail():
    """An extension with no capability filled the kept audit files with denied host/checks
    (~600 MB in 32 s, then paced under a rate limit with 64 KiB subjects) and so rotated
    earlier sessions' entries away (two reviews). Past 16 MiB of entries for its denials, its
    host requests are refused unchecked for the rest of the session, and it is not stopped."""
    s = Server()
    try:
        s.restart_with_host_client()
        path = os.path.join(s.dh, "audit.jsonl")
        before = os.path.getsize(path) if os.path.exists(path) else 0
        probe = {"method": "host/check", "params": {"capability": "network:inbound", "details": {"argv": ["x" * 60000]}}}

        def round_of(n):
            call = s.request("tools/call", {"tool": "host", "input": {"requests": [probe] * n}})
            m = s.wait_for(call)[0]
            assert "result" in m, m  # the extension is never stopped for it
            return json.loads(m["result"]["content"][0]["text"])

        rounds, refused = 0, []
        while not refused:
            answers = round_of(64)
            rounds += 1
            refused = [a for a in answers if "error" in a]
            assert all(a.get("allowed") is False for a in answers if "error" not in a), answers[:1]
            assert rounds < 20, "the denials were never refused"
        assert "refused for the rest of the session" in refused[0]["error"]["message"], refused[0]
        grown = os.path.getsize(path) - before
        assert 16 << 20 < grown <= (16 << 20) + 64 * 61000, grown
        again = round_of(8)  # nothing checked, nothing written any more
        assert all("refused for the rest of the session" in a["error"]["message"] for a in again), again
        assert os.path.getsize(path) - before == grown
        print(f"     refused after {rounds} rounds of 64 denials of 60 kB: the trail grew {grown >> 20} MiB")
    finally:
        s.close()


def test_a_65th_host_request_in_flight_is_refused_unchecked():
    """Host/checks of a pending capability wait for the client's answer: while 64 wait, the
    65th is refused at once, before any check (no question, no audit entry)."""
    s = Server()
    try:
        s.restart_with_host_client()
        probe = {"method": "host/check", "params": {"capability": "filesystem:read", "details": {"path": "a.txt"}}}
        call = s.request("tools/call", {"tool": "host", "input": {"requests": [probe] * 65}})
        asked, answered = 0, None
        while answered is None:
            m = s.read()
            assert m is not None, "EOF before the answer"
            if m.get("method") == "approval/request":
                if asked == 0:
                    time.sleep(0.5)  # every request of the round has reached dhara by now
                asked += 1
                s.answer(m, "deny")
                continue
            assert m.get("id") == call and "result" in m, m
            answered = json.loads(m["result"]["content"][0]["text"])
        refused = [a for a in answered if "error" in a]
        assert len(refused) == 1 and "64 host requests of this extension are in flight" in refused[0]["error"]["message"], refused
        assert all(a.get("allowed") is False for a in answered if "error" not in a), answered[:2]
        with open(os.path.join(s.dh, "audit.jsonl")) as f:
            checks = sum(1 for line in f if '"tool":"host/check"' in line)
        assert checks == 64, checks
    finally:
        s.close()

if __name__ == "__main__":
    harness.run(globals())
