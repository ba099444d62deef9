#!/usr/bin/env python3
"""The bundled `std` extension (read, write, edit, ls, grep, bash), driven through
`dhara run --calls -` as an agent would, with dhara's gate in front of it; and its protocol
spoken directly, without dhara, with malformed input.

Usage: std_tools_test.py DHARA_BINARY SOURCE_ROOT   (env DHARA_BUILD: the build dir)
Prints `N passed, M failed` last; exits 1 on any failure.
"""
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the shared runner beside this file)

DHARA, SOURCE = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
BUILD = os.environ.get("DHARA_BUILD") or os.path.join(SOURCE, "build")
STD = os.path.join(BUILD, "extensions", "std")  # the installable folder: dhara-std + manifest.json
KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret-key-material\n-----END OPENSSH PRIVATE KEY-----\n"


class Session:
    """A throwaway HOME (with ~/.ssh/id_rsa) and DHARA_HOME, std copied into its extensions
    folder (approved with --all unless told otherwise), and a project folder to run from."""

    def __init__(self, config=None, approve=True):
        self.root = os.path.realpath(tempfile.mkdtemp(prefix="dhara-std-"))
        self.home = os.path.join(self.root, "home")
        self.dh = os.path.join(self.home, ".dhara")
        self.project = os.path.join(self.root, "project")
        os.makedirs(os.path.join(self.home, ".ssh"))
        os.makedirs(self.project)
        with open(os.path.join(self.home, ".ssh", "id_rsa"), "w") as f:
            f.write(KEY)
        shutil.copytree(STD, os.path.join(self.dh, "extensions", "std"))
        if config is not None:
            with open(os.path.join(self.dh, "config.json"), "w") as f:
                json.dump(config, f)
        # System programs only: a PATH shim (pyenv) lies outside /usr and the command rules refuse it.
        self.env = {"HOME": self.home, "DHARA_HOME": self.dh, "PATH": "/usr/local/bin:/usr/bin:/bin"}
        if approve:
            self.permissions("approve", "std", "--all")

    def file(self, rel, content):
        path = os.path.join(self.project, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb" if isinstance(content, bytes) else "w") as f:
            f.write(content)
        return path

    def text(self, rel):
        with open(os.path.join(self.project, rel)) as f:
            return f.read()

    def dhara(self, *args, stdin_text=None):
        """Runs dhara without a terminal (a new session has no /dev/tty): it never prompts."""
        p = subprocess.run([DHARA, "--no-prompt", *args], cwd=self.project, env=self.env, capture_output=True,
                           text=True, input=stdin_text if stdin_text is not None else "", timeout=120,
                           start_new_session=True)
        return p.returncode, p.stdout, p.stderr

    def permissions(self, *args):
        code, out, err = self.dhara("config", "permissions", *args)
        assert code == 0, (args, code, out, err)

    def run(self, *calls):
        """Runs the calls as one batch; returns (exit code, {id: output line}, stderr)."""
        batch = "".join(json.dumps({"id": i + 1, "tool": tool, "input": inp}) + "\n"
                        for i, (tool, inp) in enumerate(calls))
        code, out, err = self.dhara("run", "--calls", "-", stdin_text=batch)
        lines = [json.loads(line) for line in out.splitlines() if line.strip()]
        results = {line["id"]: line for line in lines}
        assert len(results) == len(calls), (code, out, err)
        return code, results, err

    def audit(self):
        path = os.path.join(self.dh, "audit.jsonl")
        return [json.loads(line) for line in open(path)] if os.path.exists(path) else []

    def close(self):
        shutil.rmtree(self.root, ignore_errors=True)


def text_of(line):
    """The text content of a batch result line."""
    return line["result"]["content"][0]["text"]


def meta_of(line):
    return line["result"].get("metadata", {})


# ---- through dhara ------------------------------------------------------------------------

def test_write_read_edit_ls_round_trip():
    s = Session()
    try:
        code, r, err = s.run(
            ("write", {"path": "notes/todo.txt", "content": "alpha\nbeta\ngamma\n"}),
            ("read", {"path": "notes/todo.txt"}),
            ("read", {"path": "notes/todo.txt", "offset": 2, "limit": 1}),
            ("edit", {"path": "notes/todo.txt", "oldText": "beta", "newText": "BETA"}),
            ("ls", {"path": "notes"}),
            ("ls", {}),
        )
        assert code == 0, (code, r, err)
        assert all(line["status"] == "ok" and line["extension"] == "std" for line in r.values()), r
        assert "wrote 17 bytes to 'notes/todo.txt' (new file)" == text_of(r[1]), r[1]
        assert meta_of(r[1]) == {"path": "notes/todo.txt", "bytesWritten": 17, "created": True}, r[1]
        assert text_of(r[2]) == "alpha\nbeta\ngamma\n", r[2]
        assert text_of(r[3]).startswith("beta\n[showing lines 2-2: ") and "offset=3]" in text_of(r[3]), r[3]
        assert meta_of(r[3])["nextOffset"] == 3 and meta_of(r[3])["truncated"] is True, r[3]
        assert text_of(r[4]) == "replaced 1 occurrence in 'notes/todo.txt'", r[4]
        assert s.text("notes/todo.txt") == "alpha\nBETA\ngamma\n"
        entries = meta_of(r[5])["entries"]
        assert entries == [{"name": "todo.txt", "type": "file", "size": 17}], entries
        assert text_of(r[5]) == "todo.txt (17 bytes)\n", r[5]
        # No path: the session's directory, which dhara checks with host/check.
        assert {"name": "notes", "type": "dir"}.items() <= meta_of(r[6])["entries"][0].items(), r[6]
        assert text_of(r[6]) == "notes/\n", r[6]

        os.chmod(os.path.join(s.project, "notes", "todo.txt"), 0o640)
        code, r, err = s.run(("write", {"path": "notes/todo.txt", "content": "replaced\n"}))
        assert code == 0 and meta_of(r[1])["created"] is False, (code, r, err)
        assert s.text("notes/todo.txt") == "replaced\n"
        assert os.stat(os.path.join(s.project, "notes", "todo.txt")).st_mode & 0o777 == 0o640  # mode kept
        # No temporary files are left beside the target.
        assert sorted(os.listdir(os.path.join(s.project, "notes"))) == ["todo.txt"]
        checks = [a for a in s.audit() if a.get("tool") == "ls" or a.get("details", {}).get("path") == s.project]
        assert any(a["action"] == "allowed" and a["details"].get("path") == s.project for a in checks), checks
    finally:
        s.close()


def test_edit_changes_the_file_and_refuses_ambiguity():
    s = Session()
    try:
        s.file("a.txt", "one two one\n")
        s.file("b.txt", "x = 1\ny = 2\n")
        code, r, _ = s.run(
            ("edit", {"path": "a.txt", "oldText": "one", "newText": "1"}),
            ("edit", {"path": "a.txt", "oldText": "three", "newText": "3"}),
            ("edit", {"path": "b.txt", "oldText": "y = 2", "newText": "y = 20"}),
            ("edit", {"path": "a.txt", "oldText": "one", "newText": "1", "replaceAll": True}),
            ("edit", {"path": "a.txt", "oldText": "", "newText": "x"}),
        )
        assert code == 4, (code, r)  # tool errors
        assert r[1]["status"] == "error" and r[1]["result"]["isError"] is True, r[1]
        assert "occurs 2 times" in text_of(r[1]) and "replaceAll" in text_of(r[1]), r[1]
        assert r[2]["status"] == "error" and "was not found" in text_of(r[2]), r[2]
        assert r[3]["status"] == "ok" and s.text("b.txt") == "x = 1\ny = 20\n", r[3]
        assert r[4]["status"] == "ok" and text_of(r[4]) == "replaced 2 occurrences in 'a.txt'", r[4]
        assert s.text("a.txt") == "1 two 1\n"
        assert r[5]["status"] == "error" and "oldText is empty" in text_of(r[5]), r[5]
    finally:
        s.close()


def test_read_refuses_missing_folders_and_binary_files():
    s = Session()
    try:
        s.file("data.bin", b"\x7fELF\x00\x01\x02")
        s.file("src/x.txt", "x\n")
        s.file("long.txt", "".join(f"line {i}\n" for i in range(1, 2501)))
        code, r, _ = s.run(
            ("read", {"path": "nope.txt"}),
            ("read", {"path": "src"}),
            ("read", {"path": "data.bin"}),
            ("read", {"path": "long.txt"}),
            ("read", {"path": "long.txt", "offset": 2501}),
            ("read", {"path": "long.txt", "offset": 2500}),
            ("read", {"path": 7}),
        )
        assert code == 4, (code, r)
        assert r[1]["status"] == "error" and text_of(r[1]) == "'nope.txt' does not exist", r[1]
        assert r[2]["status"] == "error" and "is a folder" in text_of(r[2]) and "ls" in text_of(r[2]), r[2]
        assert r[3]["status"] == "error" and "binary" in text_of(r[3]), r[3]
        lines = text_of(r[4]).split("\n")
        assert lines[0] == "line 1" and lines[1999] == "line 2000", lines[:3]
        assert lines[2000].startswith("[showing lines 1-2000: the limit of 2000 lines was reached"), lines[2000]
        assert lines[2000].endswith("continue with offset=2001]"), lines[2000]
        assert r[5]["status"] == "error" and "past the end" in text_of(r[5]) and "2500 lines" in text_of(r[5]), r[5]
        assert r[6]["status"] == "ok" and text_of(r[6]) == "line 2500\n", r[6]
        # A non-string path: the gate cannot check it, so it denies.
        assert r[7]["status"] == "denied", r[7]
    finally:
        s.close()


def test_grep_finds_lines_and_skips_binary_and_git():
    s = Session()
    try:
        s.file("src/a.py", "def hello():\n    return 42\n")
        s.file("src/deep/b.txt", "say Hello world\n")
        s.file(".git/config", "hello from git\n")
        s.file("blob.bin", b"hello\x00binary")
        code, r, _ = s.run(
            ("grep", {"pattern": "hello"}),
            ("grep", {"pattern": "hello", "ignoreCase": True, "glob": "*.txt"}),
            ("grep", {"pattern": r"return \d+$", "path": "src"}),
            ("grep", {"pattern": "nothing-like-this"}),
            ("grep", {"pattern": "(unclosed"}),
            ("grep", {"pattern": "l", "path": "src", "maxResults": 1}),
            ("grep", {"pattern": "hello|world", "glob": "src/**/*.py"}),
        )
        assert text_of(r[1]).splitlines() == ["src/a.py:1: def hello():", "[1 binary files skipped]"], r[1]
        assert text_of(r[2]).splitlines() == ["src/deep/b.txt:1: say Hello world"], r[2]
        assert text_of(r[3]).splitlines() == ["src/a.py:2:     return 42"], r[3]
        assert text_of(r[4]).startswith("no matches\n") and r[4]["status"] == "ok", r[4]
        assert r[5]["status"] == "error" and "not a valid regular expression" in text_of(r[5]), r[5]
        assert meta_of(r[6])["matches"] == 1 and meta_of(r[6])["truncated"] is True, r[6]
        assert "stopped after 1 matches" in text_of(r[6]), r[6]
        assert text_of(r[7]).splitlines() == ["src/a.py:1: def hello():"], r[7]
        assert code == 4  # the invalid pattern is a tool error
        # Every file read below the root was checked (and audited) by dhara.
        grep_checks = {a["details"].get("path") for a in s.audit() if a.get("tool") == "host/check"}
        assert os.path.join(s.project, "src", "a.py") in grep_checks, grep_checks
        assert os.path.join(s.project, ".git", "config") not in grep_checks, grep_checks
        # Host requests and tool calls of one batch carry the same session id.
        sessions = {a.get("session") for a in s.audit() if a.get("tool")}
        assert len(sessions) == 1 and sessions.pop().startswith("batch-"), s.audit()
    finally:
        s.close()


def test_bash_runs_programs_without_a_shell():
    s = Session()
    try:
        s.file("sub/f.txt", "file text\n")
        code, r, err = s.run(
            ("bash", {"argv": ["echo", "hello  world", "$HOME"]}),
            ("bash", {"command": "cat sub/f.txt"}),
            ("bash", {"command": "pwd"}),
            ("bash", {"argv": ["pwd"], "cwd": "sub"}),
            ("bash", {"argv": ["ls", "no-such-file"]}),
            ("bash", {"argv": ["tail", "-f", "/dev/null"], "timeoutMs": 300}),
            ("bash", {"argv": ["python3", "-c", "import sys; sys.stdout.write('x' * 200000); sys.stderr.write('warn')"]}),
        )
        assert code == 4, (code, r, err)
        m = meta_of(r[1])
        assert r[1]["status"] == "ok" and m["stdout"] == "hello  world $HOME\n" and m["exitCode"] == 0, r[1]
        assert text_of(r[1]) == "hello  world $HOME\n[exit code 0]", r[1]
        assert meta_of(r[2])["stdout"] == "file text\n", r[2]
        # The session's directory, not the extension's own folder, is where programs run.
        assert meta_of(r[3])["stdout"] == os.path.realpath(s.project) + "\n", r[3]
        assert meta_of(r[4])["stdout"] == os.path.realpath(os.path.join(s.project, "sub")) + "\n", r[4]
        assert r[5]["status"] == "error" and meta_of(r[5])["exitCode"] == 2 and meta_of(r[5])["stderr"], r[5]
        m = meta_of(r[6])
        assert r[6]["status"] == "error" and m["timedOut"] is True and m["signal"] == "SIGKILL", r[6]
        assert "timed out after 300 ms" in text_of(r[6]), r[6]
        m = meta_of(r[7])
        assert m["exitCode"] == 0 and m["truncated"] is True and m["stderr"] == "warn", r[7]
        assert "bytes omitted" in m["stdout"] and len(m["stdout"]) < 70000, len(m["stdout"])
    finally:
        s.close()


def test_links_are_followed_only_as_the_gate_followed_them():
    s = Session()
    try:
        s.file("real.txt", "real\n")
        os.symlink("real.txt", os.path.join(s.project, "link.txt"))
        os.symlink(os.path.join(s.home, ".ssh", "id_rsa"), os.path.join(s.project, "escape"))
        code, r, _ = s.run(
            ("write", {"path": "link.txt", "content": "through the link\n"}),
            ("read", {"path": "escape"}),
            ("write", {"path": "escape", "content": "overwritten"}),
            ("ls", {"path": "."}),
        )
        assert r[1]["status"] == "ok", r[1]
        # The gate checked the link's target, so the target is what was written; the link stays.
        assert os.path.islink(os.path.join(s.project, "link.txt"))
        assert s.text("real.txt") == "through the link\n"
        assert r[2]["status"] == "denied" and r[3]["status"] == "denied", (r[2], r[3])
        assert open(os.path.join(s.home, ".ssh", "id_rsa")).read() == KEY
        entries = {e["name"]: e for e in meta_of(r[4])["entries"]}
        assert entries["link.txt"]["type"] == "symlink" and entries["link.txt"]["target"] == "real.txt", entries
        assert "link.txt -> real.txt" in text_of(r[4]), r[4]
        assert code == 3, code
    finally:
        s.close()


# ---- denials -----------------------------------------------------------------------------

def test_secrets_stay_denied_even_under_an_allowed_home():
    s = Session(config={"security": {"allowedPaths": ["~"]}})
    try:
        with open(os.path.join(s.home, "notes.txt"), "w") as f:
            f.write("PRIVATE notes in home\n")
        code, r, _ = s.run(
            ("read", {"path": "~/.ssh/id_rsa"}),
            ("read", {"path": "~/notes.txt"}),
            ("grep", {"pattern": "PRIVATE", "path": "~"}),
            ("ls", {"path": "~/.ssh"}),
        )
        assert code == 3, (code, r)
        assert r[1]["status"] == "denied" and ".ssh" in r[1]["error"]["message"], r[1]
        assert "secret" not in json.dumps(r[1]), r[1]
        assert r[2]["status"] == "ok" and text_of(r[2]) == "PRIVATE notes in home\n", r[2]
        # grep from an allowed home walks into ~/.ssh only through dhara's checks, which deny it.
        hits = text_of(r[3])
        assert r[3]["status"] == "ok" and "notes.txt:1: PRIVATE notes in home" in hits, hits
        assert "id_rsa" not in hits and "secret" not in hits and "BEGIN OPENSSH" not in hits, hits
        assert meta_of(r[3])["skippedDenied"] >= 1 and "denied by dhara's policy" in hits, hits
        assert r[4]["status"] == "denied", r[4]
        denied = [a for a in s.audit() if a["action"] == "denied" and a.get("tool") == "host/check"]
        assert any(a["details"].get("path") == os.path.join(s.home, ".ssh") for a in denied), denied
    finally:
        s.close()


def test_write_needs_filesystem_write():
    s = Session(approve=False)
    try:
        s.permissions("approve", "std", "filesystem:read")
        s.file("keep.txt", "original\n")
        code, r, _ = s.run(
            ("write", {"path": "new.txt", "content": "x"}),
            ("edit", {"path": "keep.txt", "oldText": "original", "newText": "changed"}),
            ("read", {"path": "keep.txt"}),
        )
        assert code == 3, (code, r)
        assert r[1]["status"] == "denied" and r[1]["error"]["data"]["capability"] == "filesystem:write", r[1]
        assert r[2]["status"] == "denied", r[2]
        assert r[3]["status"] == "ok" and text_of(r[3]) == "original\n", r[3]
        assert not os.path.exists(os.path.join(s.project, "new.txt"))
        assert s.text("keep.txt") == "original\n"
    finally:
        s.close()


def test_bash_refuses_shells_and_unlisted_commands():
    s = Session()
    try:
        s.file("x", "x\n")
        code, r, _ = s.run(
            ("bash", {"command": "ls; cat ~/.ssh/id_rsa"}),
            ("bash", {"command": "echo $(cat ~/.ssh/id_rsa)"}),
            ("bash", {"command": "cat x | sh"}),
            ("bash", {"argv": ["bash", "-c", "echo hi"]}),
            ("bash", {"command": "sh -c id"}),
            ("bash", {"command": "echo 'quoted'"}),  # passes the gate (first word); the extension refuses
        )
        for i in (1, 2, 3):
            assert r[i]["status"] == "denied" and "metacharacters" in r[i]["error"]["message"], r[i]
        for i in (4, 5):
            assert r[i]["status"] == "denied" and "process.commands" in r[i]["error"]["message"], r[i]
        assert r[6]["status"] == "error" and "quotes" in text_of(r[6]), r[6]
        assert code == 4, code
    finally:
        s.close()


def test_bash_is_denied_once_process_spawn_is_revoked():
    s = Session()
    try:
        s.permissions("revoke", "std", "process:spawn")
        s.file("a.txt", "still readable\n")
        code, r, _ = s.run(("bash", {"argv": ["ls"]}), ("read", {"path": "a.txt"}))
        assert code == 3, (code, r)
        assert r[1]["status"] == "denied" and r[1]["error"]["data"]["capability"] == "process:spawn", r[1]
        assert r[2]["status"] == "ok" and text_of(r[2]) == "still readable\n", r[2]
    finally:
        s.close()


# ---- the protocol, without dhara ---------------------------------------------------------

class Direct:
    """dhara-std started as dhara starts it (its folder as cwd), spoken to line by line."""

    def __init__(self):
        self.work = os.path.realpath(tempfile.mkdtemp(prefix="dhara-std-direct-"))
        self.proc = subprocess.Popen([os.path.join(STD, "dhara-std")], cwd=STD, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                                                  "HOME": self.work}, start_new_session=True)
        self.buf = b""
        self.checks = []  # paths dhara was asked about

    def send(self, obj):
        self.proc.stdin.write((obj if isinstance(obj, str) else json.dumps(obj)).encode() + b"\n")
        self.proc.stdin.flush()

    def line(self, guard=30):
        """The next line from the extension (the guard only stops a hung test)."""
        deadline = time.monotonic() + guard
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            assert left > 0, "dhara-std did not answer"
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                assert chunk, "dhara-std closed its stdout"
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def answer_for(self, id_, host=lambda params: {"allowed": True}):
        """Reads until the answer to `id_`, answering host/check requests with `host`."""
        while True:
            msg = self.line()
            if msg.get("method") == "host/check":
                self.checks.append(msg["params"]["details"]["path"])
                reply = host(msg["params"])
                key = "error" if "code" in reply else "result"
                self.send({"jsonrpc": "2.0", "id": msg["id"], key: reply})
                continue
            assert msg.get("id") == id_, (id_, msg)
            return msg

    def call(self, id_, tool, inp, cwd=None, call_id=None, host=lambda params: {"allowed": True}):
        self.send({"jsonrpc": "2.0", "id": id_, "method": "tools/execute",
                   "params": {"toolCallId": call_id or f"c{id_}", "toolName": tool, "input": inp,
                              "context": {"cwd": cwd or self.work, "sessionId": "t"}}})
        return self.answer_for(id_, host)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.work, ignore_errors=True)


def test_protocol_errors_never_stop_the_extension():
    d = Direct()
    try:
        d.send("this is not json")
        assert d.line()["error"]["code"] == -32700
        d.send("[1, 2]")
        assert d.line()["error"]["code"] == -32600
        d.send("[" * 100000 + "]" * 100000)  # nested far deeper than any parser should recurse
        assert d.line()["error"]["code"] == -32700
        d.send({"jsonrpc": "2.0", "method": "some/notification"})  # no answer
        d.send({"jsonrpc": "2.0", "id": 1, "method": "no/such/method"})
        msg = d.line()
        assert msg["id"] == 1 and msg["error"]["code"] == -32601, msg
        d.send({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": "0.1.0"}})
        init = d.line()["result"]
        caps = {t["name"]: t["capabilities"] for t in init["tools"]}
        assert init["name"] == "std" and init["version"] == "0.1.0", init
        assert caps == {"read": ["filesystem:read"], "write": ["filesystem:write"],
                        "edit": ["filesystem:read", "filesystem:write"], "ls": ["filesystem:read"],
                        "grep": ["filesystem:read"], "bash": ["process:spawn"]}, caps
        d.send({"jsonrpc": "2.0", "id": 3, "method": "tools/execute", "params": "nope"})
        assert d.line()["error"]["code"] == -32600  # params must be structured (JSON-RPC 2.0)
        d.send({"jsonrpc": "2.0", "id": 3, "method": "tools/execute", "params": ["read"]})
        assert d.line()["error"]["code"] == -32602
        assert d.call(4, "nope", {})["error"]["code"] == -32601
        assert d.call(5, "read", {"path": 5})["error"]["code"] == -32602
        assert d.call(6, "read", {})["error"]["code"] == -32602
        assert d.call(7, "read", {"path": "x", "offset": 0})["error"]["code"] == -32602
        assert d.call(8, "bash", {"command": "ls", "argv": ["ls"]})["error"]["code"] == -32602
        assert d.call(9, "bash", {"argv": []})["error"]["code"] == -32602
        assert d.call(10, "grep", {"pattern": "x", "maxResults": "all"})["error"]["code"] == -32602
        # A relative path resolves against context.cwd, not the extension's own folder (which
        # holds a manifest.json too).
        with open(os.path.join(d.work, "manifest.json"), "w") as f:
            f.write("the session's file\n")
        msg = d.call(11, "read", {"path": "manifest.json"})
        assert msg["result"]["content"][0]["text"] == "the session's file\n", msg
        msg = d.call(12, "read", {"path": "manifest.json"}, cwd="relative/dir")
        assert msg["result"]["isError"] is True and "context.cwd" in msg["result"]["content"][0]["text"], msg
        assert d.proc.poll() is None
        d.send({"jsonrpc": "2.0", "id": 99, "method": "shutdown"})
        assert d.line() == {"jsonrpc": "2.0", "id": 99, "result": {"status": "ok"}}
        assert d.proc.wait(timeout=30) == 0
    finally:
        d.close()


def test_cancel_kills_a_running_bash_and_answers():
    d = Direct()
    try:
        pid = start_long_command(d, 1)
        assert not gone(pid)
        # Other calls are answered while it runs.
        msg = d.call(2, "ls", {"path": "."})
        assert "pid1" in [e["name"] for e in msg["result"]["metadata"]["entries"]], msg
        d.send({"jsonrpc": "2.0", "method": "tools/cancel", "params": {"toolCallId": "long1"}})
        msg = d.answer_for(1)
        assert msg["error"]["code"] == -32004, msg
        assert not os.path.exists(f"/proc/{pid}"), "the cancelled command still runs"  # killed and reaped
        d.send({"jsonrpc": "2.0", "id": 3, "method": "shutdown"})
        assert d.line()["result"] == {"status": "ok"}
    finally:
        d.close()


def gone(pid):
    """True once `pid` has exited (a zombie left to a subreaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def start_long_command(d, id_):
    """Starts a bash call that runs until killed; returns its pid."""
    pid_file = os.path.join(d.work, f"pid{id_}")
    d.send({"jsonrpc": "2.0", "id": id_, "method": "tools/execute",
            "params": {"toolCallId": f"long{id_}", "toolName": "bash", "context": {"cwd": d.work},
                       "input": {"argv": ["sh", "-c", f"echo $$ > t{id_} && mv t{id_} pid{id_} && exec tail -f /dev/null"]}}})
    deadline = time.monotonic() + 30
    while not os.path.exists(pid_file):
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.02)
    return int(open(pid_file).read())


def test_running_commands_die_with_the_extension():
    for ending in ("eof", "sigterm"):
        d = Direct()
        try:
            pid = start_long_command(d, 1)
            assert not gone(pid)
            if ending == "eof":
                d.proc.stdin.close()
                assert d.proc.wait(timeout=30) == 0, ending
            else:
                d.proc.terminate()
                assert d.proc.wait(timeout=30) == -15, ending  # it still dies of the SIGTERM
            deadline = time.monotonic() + 30
            while not gone(pid):
                assert time.monotonic() < deadline, f"the command survived the extension ({ending})"
                time.sleep(0.02)
        finally:
            d.close()


def test_grep_and_ls_ask_dhara_about_what_the_gate_did_not_check():
    d = Direct()
    try:
        for rel, text in (("ok.txt", "token here\n"), ("secret/key.txt", "token secret\n"), ("sub/b.txt", "token b\n")):
            os.makedirs(os.path.dirname(os.path.join(d.work, rel)), exist_ok=True)
            with open(os.path.join(d.work, rel), "w") as f:
                f.write(text)
        os.symlink(os.path.join(d.work, "secret", "key.txt"), os.path.join(d.work, "link.txt"))

        def policy(params):
            path = params["details"]["path"]
            return {"allowed": False, "reason": "denied by a test rule"} if "/secret" in path else {"allowed": True}

        msg = d.call(1, "grep", {"pattern": "token"}, host=policy)
        text = msg["result"]["content"][0]["text"]
        assert text.splitlines()[:2] == ["ok.txt:1: token here", "sub/b.txt:1: token b"], text
        assert "secret" not in text.splitlines()[0] + text.splitlines()[1], text
        assert "[1 entries denied by dhara's policy, e.g.: denied by a test rule]" in text, text
        # The root (no path given) and every folder and file below it were asked about; the
        # symlink was neither followed nor asked about.
        assert d.checks[0] == os.path.realpath(d.work), d.checks
        assert os.path.join(os.path.realpath(d.work), "secret") in d.checks, d.checks
        assert not any(c.endswith("link.txt") for c in d.checks), d.checks
        # No answer that allows means no listing: an error answer fails closed.
        msg = d.call(2, "ls", {}, host=lambda params: {"code": -32601, "message": "this session has no host API"})
        assert msg["result"]["isError"] is True and "no host API" in msg["result"]["content"][0]["text"], msg
        msg = d.call(3, "ls", {}, host=lambda params: {"allowed": False, "reason": "outside"})
        assert msg["error"]["code"] == -32002 and msg["error"]["data"]["capability"] == "filesystem:read", msg
    finally:
        d.close()


if __name__ == "__main__":
    assert os.path.exists(os.path.join(STD, "dhara-std")), f"build dhara-std first: {STD} has no dhara-std"
    harness.run(dict(globals()))
