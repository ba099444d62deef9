#!/usr/bin/env python3
"""`make run` (scripts/run-demo) tells the story it promises, and each example extension in
examples/extensions works through a real `dhara run`: allowed calls do their job, denied ones
come back denied with the reason, and the audit trail records both.

Usage: demo_test.py DHARA_BINARY SOURCE_ROOT   (env DHARA_BUILD: the build dir, with the bundled
std extension in $DHARA_BUILD/extensions/std)
Prints `N passed, M failed` last; exits 1 on any failure.
"""
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the shared runner beside this file)

DHARA, SOURCE = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
BUILD = os.path.abspath(os.environ.get("DHARA_BUILD") or os.path.dirname(DHARA))
EXAMPLES = os.path.join(SOURCE, "examples", "extensions")
DEMO = os.path.join(SOURCE, "examples", "demo")
LIMIT = 120  # seconds: only so that a hang fails the test instead of blocking ctest


def run(argv, **kw):
    """Runs a command in its own session (no controlling terminal, so nothing can prompt)."""
    p = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                       start_new_session=True, timeout=LIMIT, **kw)
    return p.returncode, p.stdout, p.stderr


class Home:
    """A copy of examples/demo (home with ~/.dhara, and a project) in a throwaway folder, with
    the named example extensions installed (an installed extension is a folder in
    $DHARA_HOME/extensions) and the given capabilities approved."""

    def __init__(self, *extensions, approve=()):
        self.root = tempfile.mkdtemp(prefix="dhara-demo-test-")
        shutil.copytree(os.path.join(DEMO, "home"), os.path.join(self.root, "home"), symlinks=True)
        shutil.copytree(os.path.join(DEMO, "project"), os.path.join(self.root, "project"), symlinks=True)
        self.home = os.path.join(self.root, "home")
        self.dh = os.path.join(self.home, ".dhara")
        self.project = os.path.join(self.root, "project")
        self.env = {"HOME": self.home, "DHARA_HOME": self.dh, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        for name in extensions:
            shutil.copytree(os.path.join(EXAMPLES, name), os.path.join(self.dh, "extensions", name))
        for ext, cap in approve:
            code, _, err = self.dhara("config", "permissions", "approve", ext, cap)
            assert code == 0, err

    def dhara(self, *args, stdin_text=None):
        if stdin_text is None:
            return run([DHARA, *args], cwd=self.project, env=self.env)
        p = subprocess.run([DHARA, *args], cwd=self.project, env=self.env, input=stdin_text, capture_output=True,
                           text=True, start_new_session=True, timeout=LIMIT)
        return p.returncode, p.stdout, p.stderr

    def calls(self, *calls):
        """Runs the calls as one batch; returns (exit code, {id: result line}, stderr)."""
        batch = "".join(json.dumps(c) + "\n" for c in calls)
        code, out, err = self.dhara("--no-prompt", "run", "--calls", "-", stdin_text=batch)
        results = {}
        for line in out.splitlines():
            r = json.loads(line)
            results[r["id"]] = r
        return code, results, err

    def audit(self):
        path = os.path.join(self.dh, "audit.jsonl")
        return [json.loads(l) for l in open(path)] if os.path.exists(path) else []

    def close(self):
        shutil.rmtree(self.root, ignore_errors=True)


def text_of(result):
    return "\n".join(c.get("text", "") for c in result.get("result", {}).get("content", []))


def denial(result):
    """(capability, reason) of a denied call."""
    assert result["status"] == "denied" and result["error"]["code"] == -32002, result
    data = result["error"]["data"]
    return data["capability"], data["reason"]


# ---- make run ----------------------------------------------------------------------------

def test_make_run_tells_the_whole_story():
    assert os.path.exists(os.path.join(BUILD, "extensions", "std", "manifest.json")), \
        f"the std extension is not built in {BUILD}/extensions/std (cmake --build {BUILD} --target dhara-std)"
    # A HOME and DHARA_HOME that must stay untouched: the demo makes its own.
    guard = tempfile.mkdtemp(prefix="dhara-demo-guard-")
    env = dict(os.environ, HOME=guard, DHARA_HOME=os.path.join(guard, ".dhara"), NO_COLOR="1")
    try:
        code, out, err = run([os.path.join(SOURCE, "scripts", "run-demo"), BUILD], env=env, cwd=guard)
        assert os.listdir(guard) == [], f"the demo wrote into the caller's HOME: {os.listdir(guard)}"
    finally:
        shutil.rmtree(guard, ignore_errors=True)
    assert code == 0, f"run-demo exited {code}\n{out}\n{err}"
    assert "\033[" not in out, "colour without a terminal"
    work = re.search(r"a fresh home in (\S+)", out)
    assert work and not os.path.exists(work.group(1)), "the demo's temporary home was left behind"
    assert "note: the std extension is not built" not in out, out

    # The batch, one row per call: id, extension/tool, status, detail.
    rows = {m.group(1): (m.group(2), m.group(3), m.group(4))
            for m in re.finditer(r"^  (\S+) +(\S+/\S+) +(ok|denied|error|rejected|cancelled) +(.*)$", out, re.M)}
    expected = {"read-project-file": ("std/read", "ok"), "read-ssh-key": ("std/read", "denied"),
                "fetch-unlisted-domain": ("web-tools/fetch", "denied"),
                "write-without-approval": ("std/write", "denied"), "add-note": ("notes/add_note", "ok"),
                "file-stats": ("file-stats/file_stats", "ok")}
    assert {k: v[:2] for k, v in rows.items()} == expected, out
    assert "export function app()" in rows["read-project-file"][2], rows
    assert rows["read-ssh-key"][2].startswith("filesystem:read: ") and "~/.ssh" in rows["read-ssh-key"][2], rows
    assert "evil.example.net" in rows["fetch-unlisted-domain"][2], rows
    assert "dhara config permissions approve std filesystem:write" in rows["write-without-approval"][2], rows
    assert "~/.aws/credentials: denied by dhara" in rows["file-stats"][2], rows
    assert "3 ok, 0 error, 3 denied" in out, out

    # The permissions, in the seed's format: approved, denied, pending.
    assert re.search(r"^\$ dhara config permissions show std\nExtension: std v\S+\n"
                     r"  \[approved\] filesystem:read\n  \[denied\]   process:spawn\n"
                     r"  \[pending\]  filesystem:write\n", out, re.M), out

    # The audit trail: every denial with its reason, the allowed calls too, and the chain intact.
    audit = out[out.index("$ dhara doctor --audit-log\n"):]
    denied = [l for l in audit.splitlines() if re.search(r"\sdenied\s", l)]
    for ext, cap, subject, reason in [
            ("std", "filesystem:read", "~/.ssh/id_rsa", "is denied by the rule built-in: ~/.ssh/"),
            ("web-tools", "network:fetch", "https://evil.example.net/upload", "network.outbound"),
            ("std", "filesystem:write", "src/app.ts", "is not approved for 'std'"),
            # A rule of the demo's config is named as written there, and where.
            ("file-stats", "filesystem:read", "~/.aws/credentials",
             "'~/.aws/credentials' is denied by the rule ~/.aws/ (deniedPaths in ~/.dhara/config.json)"),
            ("std", "process:spawn", "", "revoked by the user")]:
        assert any(ext in l and cap in l and subject in l and reason in l for l in denied), \
            f"no denial of {ext} {cap} {subject} ({reason}) in\n{audit}"
    assert re.search(r"\bstd +filesystem:read +allowed +src/app\.ts", audit), audit
    assert re.search(r"\bnotes +filesystem:write +allowed +notes\.md", audit), audit
    assert "audit trail OK" in audit, audit


def test_calls_file_is_a_valid_batch_with_unique_ids():
    ids = []
    for line in open(os.path.join(DEMO, "calls.jsonl")):
        if line.strip():
            call = json.loads(line)
            assert set(call) <= {"id", "extension", "tool", "input"}, call
            ids.append(call["id"])
    assert len(ids) == len(set(ids)) == 6, ids


# ---- web-tools (python, network:fetch through host/net/fetch) ------------------------------

class LocalApi:
    """A tiny HTTP server on 127.0.0.1 standing in for api.example.com (no network in CI)."""

    def __init__(self):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = json.dumps({"path": self.path, "answer": 42}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_web_tools_fetches_a_listed_domain_through_the_host():
    h = Home("web-tools")
    api = LocalApi()
    try:
        # The test lists its own server in the installed copy's manifest (loopback must be
        # listed by name); the example's own entry, api.example.com, stays. Approved after:
        # an approval given before the list grew would not reach the new host (it is asked
        # again, docs/permissions-and-audit.md, "Scope").
        path = os.path.join(h.dh, "extensions", "web-tools", "manifest.json")
        manifest = json.load(open(path))
        manifest["network"]["outbound"].append({"domain": "127.0.0.1", "purpose": "the test's server"})
        json.dump(manifest, open(path, "w"))
        code, _, err = h.dhara("config", "permissions", "approve", "web-tools", "network:fetch")
        assert code == 0, err
        url = f"http://127.0.0.1:{api.port}/data"
        code, results, err = h.calls({"id": 1, "tool": "fetch", "input": {"url": url}})
        assert code == 0 and results[1]["status"] == "ok", (code, results, err)
        text = text_of(results[1])
        assert text.startswith(f"HTTP 200 from {url}\n") and '"answer": 42' in text, text
        # Checked twice: at the gate (the url input) and again as the host request.
        fetches = [a for a in h.audit() if a["capability"] == "network:fetch" and a["action"] == "allowed"
                   and a.get("details", {}).get("url") == url]
        assert len(fetches) == 2, h.audit()
    finally:
        api.close()
        h.close()


def test_web_tools_unlisted_domain_and_unapproved_fetch_are_denied():
    h = Home("web-tools", approve=[("web-tools", "network:fetch")])
    try:
        code, results, _ = h.calls({"id": 1, "tool": "fetch", "input": {"url": "https://evil.example.net/upload"}},
                                   {"id": 2, "tool": "fetch", "input": {"url": "http://169.254.169.254/latest/"}})
        assert code == 3, results
        cap, reason = denial(results[1])
        assert cap == "network:fetch" and "evil.example.net" in reason, reason
        assert denial(results[2])[0] == "network:fetch", results[2]
        assert [a["details"]["url"] for a in h.audit() if a["action"] == "denied"] == \
            ["https://evil.example.net/upload", "http://169.254.169.254/latest/"], h.audit()
    finally:
        h.close()
    h = Home("web-tools")  # installed, nothing approved
    try:
        code, results, _ = h.calls({"id": 1, "tool": "fetch", "input": {"url": "https://api.example.com/data"}})
        cap, reason = denial(results[1])
        assert code == 3 and "dhara config permissions approve web-tools network:fetch" in reason, reason
    finally:
        h.close()


def loopback_names():
    """Plain names in /etc/hosts (and this machine's own name) that resolve only to loopback."""
    import socket
    candidates = [socket.gethostname()]
    for line in open("/etc/hosts"):
        words = line.split("#")[0].split()
        if words and words[0].startswith("127."):
            candidates += words[1:]
    found = []
    for name in candidates:
        if "localhost" in name or name.endswith(".local") or not re.fullmatch(r"[a-z0-9.-]+", name) or name in found:
            continue
        try:
            addresses = {a[4][0] for a in socket.getaddrinfo(name, None)}
        except OSError:
            continue
        if addresses and all(a.startswith("127.") for a in addresses):
            found.append(name)
    return found


def test_web_tools_without_a_domain_list_is_denied_names_that_do_not_resolve_or_resolve_to_loopback():
    h = Home("web-tools", approve=[("web-tools", "network:fetch")])
    try:
        # Without network.outbound any public host may be fetched: a name must then resolve,
        # and only to public addresses (DESIGN §4, §9), before the tool is even called.
        path = os.path.join(h.dh, "extensions", "web-tools", "manifest.json")
        manifest = json.load(open(path))
        del manifest["network"]
        json.dump(manifest, open(path, "w"))
        urls = ["http://nonexistent.invalid/a"] + [f"http://{n}:9/" for n in loopback_names()]
        code, results, err = h.calls(*({"id": i, "tool": "fetch", "input": {"url": u}} for i, u in enumerate(urls)))
        assert code == 3, (code, results, err)
        cap, reason = denial(results[0])
        assert cap == "network:fetch" and reason.startswith("the host 'nonexistent.invalid' could not be resolved ("), reason
        for i in range(1, len(urls)):
            cap, reason = denial(results[i])
            assert " resolves to 127." in reason and "list the host by name in network.outbound" in reason, reason
        denied = [a for a in h.audit() if a["action"] == "denied"]
        assert [a["details"]["url"] for a in denied] == urls, denied
        assert all(a["decidedBy"] == "rule" and a["tool"] == "fetch" for a in denied), denied
    finally:
        h.close()


# ---- notes (node, filesystem:write, writes the file itself) --------------------------------

def test_notes_appends_inside_the_project():
    h = Home("notes", approve=[("notes", "filesystem:write")])
    try:
        code, results, err = h.calls(
            {"id": 1, "tool": "add_note", "input": {"path": "notes.md", "text": "first"}},
            {"id": 2, "tool": "add_note", "input": {"path": "todo.md", "text": "second\nline"}})
        assert code == 0 and [results[i]["status"] for i in (1, 2)] == ["ok", "ok"], (results, err)
        assert open(os.path.join(h.project, "notes.md")).read() == "# Notes\n- first\n"
        assert open(os.path.join(h.project, "todo.md")).read() == "# Notes\n\n- second line\n"
        assert results[2]["result"]["metadata"]["created"] is True, results[2]
    finally:
        h.close()


def test_notes_outside_the_project_or_unapproved_is_denied():
    h = Home("notes", approve=[("notes", "filesystem:write")])
    try:
        code, results, _ = h.calls(
            {"id": 1, "tool": "add_note", "input": {"path": "../outside.md", "text": "x"}},
            {"id": 2, "tool": "add_note", "input": {"path": "~/.ssh/authorized_keys", "text": "x"}})
        assert code == 3, results
        assert denial(results[1])[0] == "filesystem:write" and "outside the allowed paths" in denial(results[1])[1]
        assert denial(results[2])[0] == "filesystem:write", results[2]
        assert not os.path.exists(os.path.join(h.root, "outside.md"))
        assert not os.path.exists(os.path.join(h.home, ".ssh", "authorized_keys"))
    finally:
        h.close()
    h = Home("notes")
    try:
        code, results, _ = h.calls({"id": 1, "tool": "add_note", "input": {"path": "notes.md", "text": "x"}})
        assert code == 3 and "approve notes filesystem:write" in denial(results[1])[1], results
        assert open(os.path.join(h.project, "notes.md")).read() == "# Notes\n"
    finally:
        h.close()


# ---- file-stats (python, host/fs/read; a -32002 per path) ----------------------------------

def test_file_stats_reads_through_the_host_and_reports_each_denial():
    h = Home("file-stats", approve=[("file-stats", "filesystem:read")])
    try:
        code, results, err = h.calls(
            {"id": 1, "tool": "file_stats", "input": {"paths": ["src/app.ts", "~/.aws/credentials", "/etc/passwd"]}},
            {"id": 2, "tool": "file_stats", "input": {"paths": ["~/.ssh/id_rsa"]}})
        # One denied path does not fail the call; a call that read nothing is a tool error.
        assert code == 4 and results[1]["status"] == "ok" and results[2]["status"] == "error", (results, err)
        lines = text_of(results[1]).splitlines()
        assert lines[0] == "src/app.ts: 3 lines, 7 words, 39 bytes", lines
        assert lines[1].startswith("~/.aws/credentials: denied by dhara (filesystem:read): "), lines
        assert lines[2].startswith("/etc/passwd: denied by dhara (filesystem:read): "), lines
        files = results[1]["result"]["metadata"]["files"]
        assert files[0]["lines"] == 3 and files[1]["denied"] and files[2]["denied"], files
        assert text_of(results[2]).startswith("~/.ssh/id_rsa: denied by dhara"), results[2]
        denied = [(a["extension"], a["details"].get("path")) for a in h.audit() if a["action"] == "denied"]
        assert denied == [("file-stats", "~/.aws/credentials"), ("file-stats", "/etc/passwd"),
                          ("file-stats", "~/.ssh/id_rsa")], h.audit()
    finally:
        h.close()


def test_file_stats_without_approval_is_denied_at_the_gate():
    h = Home("file-stats", approve=[("file-stats", "filesystem:read")])
    try:
        code, _, err = h.dhara("config", "permissions", "revoke", "file-stats", "filesystem:read")
        assert code == 0, err
        code, results, err = h.calls({"id": 1, "tool": "file_stats", "input": {"paths": ["src/app.ts"]}})
        assert code == 3 and denial(results[1])[0] == "filesystem:read", results
        assert re.search(r"^dhara: 1 call in [0-9.]+ s: 0 ok, 0 error, 1 denied, 0 rejected, 0 cancelled$", err, re.M), err
    finally:
        h.close()


def place_dhara(folder):
    """The dhara executable at folder/dhara (a hard link where the file system allows)."""
    os.makedirs(folder, exist_ok=True)
    try:
        os.link(DHARA, os.path.join(folder, "dhara"))
    except OSError:
        shutil.copy2(DHARA, os.path.join(folder, "dhara"))
    return os.path.join(folder, "dhara")


def place_manifest(source, folder):
    os.makedirs(folder)
    shutil.copy(os.path.join(source, "manifest.json"), folder)


def demo_output(h, dhara):
    """What `dhara demo` prints (it succeeds, with nothing on stderr) and its last line, the note."""
    code, out, err = run([dhara, "demo"], cwd=h.project, env=h.env)
    assert code == 0 and err == "", (code, err)
    return out, out.rstrip("\n").rsplit("\n", 1)[-1]


def test_dhara_demo_names_the_scenario_extensions_this_home_lacks():
    # `dhara demo` decides a fixed scenario for web-tools and the bundled std. A home without
    # them gets thirteen denials; it says so once, with the commands that install them from
    # where this dhara finds them.
    h = Home()
    try:
        # Built in dhara's repository: std bundled beside the executable, web-tools among the
        # examples, and `make run`.
        repo = os.path.join(h.root, "repo")
        in_repo = place_dhara(os.path.join(repo, "build"))
        place_manifest(os.path.join(BUILD, "extensions", "std"), os.path.join(repo, "build", "extensions", "std"))
        place_manifest(os.path.join(EXAMPLES, "web-tools"), os.path.join(repo, "examples", "extensions", "web-tools"))
        os.makedirs(os.path.join(repo, "scripts"))
        open(os.path.join(repo, "scripts", "run-demo"), "w").close()
        out, note = demo_output(h, in_repo)
        assert "\nextensions: none installed\n" in out, out
        web_tools = os.path.realpath(os.path.join(repo, "examples", "extensions", "web-tools"))
        assert note == (
            f"note: web-tools and std are not installed in {h.dh}, so their checks are denied: install them with "
            f"'dhara extensions install {web_tools}' and 'dhara extensions install std', or run 'make run', "
            "which installs them in a fresh demo home")
        # A folder named std where the demo runs would be installed by that name: the note
        # names the bundled folder instead.
        os.makedirs(os.path.join(h.project, "std"))
        bundled_std = os.path.join(repo, "build", "extensions", "std")
        assert f"and 'dhara extensions install {bundled_std}', or run 'make run'" in demo_output(h, in_repo)[1]
        os.rmdir(os.path.join(h.project, "std"))
        # Installed alone, with neither bundled extensions nor examples: the folder is the user's
        # to give, and there is no `make run`.
        alone = place_dhara(os.path.join(h.root, "bin"))
        assert demo_output(h, alone)[1] == (
            f"note: web-tools and std are not installed in {h.dh}, so their checks are denied: install them with "
            "'dhara extensions install FOLDER' (the folder of web-tools and std)")
        # With web-tools installed, only std is named, and web-tools' approved fetch is allowed.
        shutil.copytree(os.path.join(EXAMPLES, "web-tools"), os.path.join(h.dh, "extensions", "web-tools"))
        code, _, err = h.dhara("config", "permissions", "approve", "web-tools", "network:fetch")
        assert code == 0, err
        code, out, err = run([in_repo, "demo"], cwd=h.project, env=h.env)
        assert code == 0 and "extensions: web-tools v" in out, (code, out, err)
        assert re.search(r"^allowed +web-tools +network:fetch +https://api\.example\.com/data ", out, re.M), out
        assert out.rstrip("\n").endswith(
            f"note: std is not installed in {h.dh}, so its checks are denied: install it with "
            "'dhara extensions install std', or run 'make run', which installs it in a fresh demo home"), out
        assert "web-tools and std" not in out, out
    finally:
        h.close()


def test_example_manifests_are_complete():
    for name in sorted(os.listdir(EXAMPLES)):
        folder = os.path.join(EXAMPLES, name)
        if not os.path.isdir(folder):
            continue
        m = json.load(open(os.path.join(folder, "manifest.json")))
        assert m["name"] == name and m["runtime"]["type"] == "subprocess", m
        entry = m["runtime"]["command"].split()[-1]
        assert os.path.exists(os.path.join(folder, entry)), f"{name}: {entry} is missing"


if __name__ == "__main__":
    harness.run(globals())
