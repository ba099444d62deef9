"""What the fault and load tests (faults_test.py, load_test.py) share: a temporary home with
test extensions installed, a `dhara serve --stdio` client, /proc scans (memory, zombies,
descriptors, leftover processes) and an independent check of the audit hash chain.

Nothing here measures speed: every time limit is a hang guard, so that a dhara that stops
answering fails the test instead of blocking ctest."""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the runner and the JSON-RPC client beside this file)

DHARA = os.path.abspath(sys.argv[1])
ROOT = os.path.abspath(sys.argv[2])
EXTENSIONS = os.path.join(ROOT, "tests", "extensions")
# The native echo program is built into the build tree beside the dhara binary.
ECHO_NATIVE = os.environ.get("DHARA_ECHO_NATIVE") or os.path.join(
    os.environ.get("DHARA_BUILD", os.path.dirname(DHARA)), "extensions", "echo-native", "echo-native")
GUARD = 20  # seconds: a call that should complete and has not by then is a hang


def _sanitized():
    """True for an ASan/UBSan or TSan build tree: there shadow memory and the allocator's
    quarantine make RSS figures meaningless, so memory bounds are reported, not asserted."""
    cache = os.path.join(os.environ.get("DHARA_BUILD", os.path.dirname(DHARA)), "CMakeCache.txt")
    try:
        with open(cache) as f:
            text = f.read()
    except OSError:
        return False
    return "DHARA_SANITIZE:BOOL=ON" in text or "DHARA_TSAN:BOOL=ON" in text


SANITIZED = _sanitized()


class Home:
    """A temporary root holding home/.dhara (with extensions/) and a project with a.txt."""

    def __init__(self, prefix="dhara-fault-"):
        self.root = os.path.realpath(tempfile.mkdtemp(prefix=prefix))
        self.home = os.path.join(self.root, "home")
        self.dh = os.path.join(self.home, ".dhara")
        self.project = os.path.join(self.root, "project")
        os.makedirs(os.path.join(self.dh, "extensions"))
        os.makedirs(self.project)
        with open(os.path.join(self.project, "a.txt"), "w") as f:
            f.write("alpha\nbeta\n")
        self.env = {"HOME": self.home, "DHARA_HOME": self.dh, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}

    def add(self, source, name=None, capabilities=None):
        """Copies tests/extensions/<source> to extensions/<name>, renaming it in its manifest
        (and, given `capabilities`, replacing the declared list)."""
        name = name or source
        to = os.path.join(self.dh, "extensions", name)
        shutil.copytree(os.path.join(EXTENSIONS, source), to,
                        ignore=shutil.ignore_patterns("echo-native", "*.o", "__pycache__"))
        if source == "echo-native":
            shutil.copy2(ECHO_NATIVE, os.path.join(to, "echo-native"))
        path = os.path.join(to, "manifest.json")
        with open(path) as f:
            m = json.load(f)
        m["name"] = name
        if capabilities is not None:
            m["capabilities"] = capabilities
        with open(path, "w") as f:
            json.dump(m, f, indent=2)
        return to

    def add_checked_echo(self, name, capability="ui:notify"):
        """The native echo whose `echo` requires `capability` (declared by its manifest and
        approved here), so every call is one check and one audit entry."""
        to = self.add("echo-native", name, capabilities=[capability])
        path = os.path.join(to, "manifest.json")
        with open(path) as f:
            m = json.load(f)
        m["runtime"]["command"] = "./echo-native --manifest-capabilities"
        with open(path, "w") as f:
            json.dump(m, f, indent=2)
        self.approve_in_file(name, capability)
        return to

    def approve_in_file(self, name, capability):
        """Records an approval the way a hand-written (seed-shaped) permissions.json holds it."""
        path = os.path.join(self.dh, "permissions.json")
        perms = json.load(open(path)) if os.path.exists(path) else {}
        perms.setdefault(name, {"version": "1.0.0", "capabilities": {}})["capabilities"][capability] = "approved"
        with open(path, "w") as f:
            json.dump(perms, f, indent=2)

    def config(self, settings):
        """Writes the global config.json (nested as the file holds it)."""
        with open(os.path.join(self.dh, "config.json"), "w") as f:
            json.dump(settings, f)

    def path(self, *parts):
        return os.path.join(self.dh, *parts)

    def cli(self, *args, check=True, **kw):
        out = subprocess.run([DHARA, *args], env=self.env, cwd=self.project, capture_output=True, text=True,
                             stdin=subprocess.DEVNULL, start_new_session=True, timeout=120, **kw)
        if check:
            assert out.returncode == 0, f"dhara {' '.join(args)}: exit {out.returncode}: {out.stderr}{out.stdout}"
        return out

    def run_batch(self, lines, *args, **kw):
        """`dhara run --calls FILE` to completion: (exit code, result lines by id, stderr)."""
        calls = os.path.join(self.root, "calls.jsonl")
        with open(calls, "w") as f:
            f.write("".join(json.dumps(l) + "\n" for l in lines))
        out = self.cli("--no-prompt", "run", "--calls", calls, *args, check=False, **kw)
        results = {}
        for raw in out.stdout.splitlines():
            r = json.loads(raw)
            results[r["id"]] = r
        return out.returncode, results, out.stderr

    def verify(self):
        """`dhara doctor --audit-log --verify`: (exit code, output)."""
        out = self.cli("doctor", "--audit-log", "--verify", check=False)
        return out.returncode, out.stdout + out.stderr

    def close(self):
        kill_leftovers(self.root)
        shutil.rmtree(self.root, ignore_errors=True)


def audit_files(dh):
    """The audit files, oldest first (audit.<n>.jsonl … audit.1.jsonl, audit.jsonl)."""
    rotated = []
    for name in os.listdir(dh):
        parts = name.split(".")
        if len(parts) == 3 and parts[0] == "audit" and parts[1].isdigit() and parts[2] == "jsonl":
            rotated.append((int(parts[1]), name))
    files = [os.path.join(dh, n) for _, n in sorted(rotated, reverse=True)]
    if os.path.exists(os.path.join(dh, "audit.jsonl")):
        files.append(os.path.join(dh, "audit.jsonl"))
    return files


def read_audit(dh, allow_torn_tail=False):
    """Every audit entry, the hash chain and seq checked here (DESIGN §9), independently of
    dhara. Returns (entries, torn) where torn is the bytes of an unterminated last line (only
    accepted with allow_torn_tail)."""
    prev, seq, entries, torn = "0" * 64, 0, [], b""
    files = audit_files(dh)
    for i, path in enumerate(files):
        with open(path, "rb") as f:
            data = f.read()
        lines = data.split(b"\n")
        last = lines.pop()  # b"" when the file ends with a newline
        if last:
            assert allow_torn_tail and i == len(files) - 1, f"{path}: unterminated line {last[:200]!r}"
            torn = last
        for n, line in enumerate(lines, 1):
            try:
                e = json.loads(line)
            except ValueError as err:
                raise AssertionError(f"{path}:{n}: not JSON ({err}): {line[:200]!r}") from None
            body, h = line[:-75], e["hash"]
            assert line[-75:] == b',"hash":"' + h.encode() + b'"}', f"{path}:{n}: bad hash suffix"
            assert hashlib.sha256(prev.encode() + body).hexdigest() == h, f"{path}:{n}: hash chain broken"
            assert e["seq"] == seq + 1, f"{path}:{n}: seq {e['seq']} after {seq}"
            prev, seq = h, e["seq"]
            entries.append(e)
    return entries, torn


# --- /proc --------------------------------------------------------------------------------------

def status_of(pid):
    """/proc/PID/status as a dict of strings ({} when the process is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return dict(l.rstrip("\n").split(":\t", 1) for l in f if ":\t" in l)
    except OSError:
        return {}


def kib(pid, key):
    """A VmRSS/VmHWM-style figure of PID in KiB (0 when gone)."""
    v = status_of(pid).get(key, "0 kB").split()
    return int(v[0])


def children_of(pid):
    """(pid, state) of every direct child of PID."""
    out = []
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{p}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if int(fields[1]) == pid:
            out.append((int(p), fields[0]))
    return out


def zombies_of(pid):
    return [c for c, state in children_of(pid) if state == "Z"]


def fds_of(pid):
    """What each open descriptor of PID points to, e.g. {"3": "pipe:[123]"}."""
    out = {}
    d = f"/proc/{pid}/fd"
    for fd in os.listdir(d):
        try:
            out[fd] = os.readlink(os.path.join(d, fd))
        except OSError:
            pass
    return out


def kinds(fds, ignore_prefix=None):
    """How many descriptors of each kind (pipe, socket, anon_inode:[eventfd], a file path → file),
    leaving out files under `ignore_prefix`."""
    count = {}
    for target in fds.values():
        if ignore_prefix and target.startswith(ignore_prefix):
            continue
        kind = target.split(":")[0] if ":" in target and not target.startswith("/") else "file"
        if kind == "anon_inode":
            kind = target
        count[kind] = count.get(kind, 0) + 1
    return count


def commands_under(root):
    """The processes running_under(root) but the launcher's two that wait for each command
    (the one dhara started, and the first of the command's PID namespace: docs/sandbox.md)."""
    found = []
    for pid in running_under(root):
        try:
            if os.path.basename(os.readlink(f"/proc/{pid}/exe")) != "dhara-launch":
                found.append(pid)
        except OSError:
            pass
    return found


def running_under(root):
    """Processes whose cwd or command line lies under `root` (extensions and their children)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            if os.readlink(f"/proc/{pid}/cwd").startswith(root):
                found.append(int(pid))
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if root.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def gone_from(root, limit=10):
    deadline = time.monotonic() + limit
    while True:
        left = [p for p in running_under(root) if status_of(p).get("State", "Z").split()[0] != "Z"]
        if not left:
            return []
        if time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def kill_leftovers(root):
    """SIGKILL, by pid, whatever the test's dhara left running under its temporary root."""
    for pid in running_under(root):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


# --- serve --------------------------------------------------------------------------------------

class Serve(harness.RpcClient):
    """`dhara serve --stdio` in a Home's project, driven over its pipes."""

    def __init__(self, home, args=(), preexec_fn=None, no_prompt=False):
        self.home = home
        proc = subprocess.Popen([DHARA, *(["--no-prompt"] if no_prompt else []), "serve", "--stdio", *args], cwd=home.project, env=home.env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=open(os.path.join(home.root, "serve.stderr"), "wb"),
                                start_new_session=True, preexec_fn=preexec_fn)
        super().__init__(proc, lambda: "stderr: " + self.stderr()[-2000:])
        self.pid = self.proc.pid
        self.held = []  # messages read while waiting for something else
        self.progress = {}  # toolCallId → (notifications seen, the last update)

    def stderr(self):
        with open(os.path.join(self.home.root, "serve.stderr"), "rb") as f:
            return f.read().decode(errors="replace")

    def wait_for(self, id_, limit=GUARD):
        """The response to `id_`; what came before it is kept in self.held."""
        for i, m in enumerate(self.held):
            if m.get("id") == id_ and "method" not in m:
                return self.held.pop(i)
        deadline = time.monotonic() + limit
        while True:
            m = self.read(max(0.01, deadline - time.monotonic()))
            assert m is not None, f"EOF before the response to {id_}; stderr: {self.stderr()[-2000:]}"
            if m.get("id") == id_ and "method" not in m:
                return m
            if m.get("method") == "tools/progress":  # floods are counted, not kept
                p = m["params"]
                seen, _ = self.progress.get(p["toolCallId"], (0, None))
                self.progress[p["toolCallId"]] = (seen + 1, p["update"])
            else:
                self.held.append(m)

    def call(self, method, params=None, limit=GUARD):
        return self.wait_for(self.request(method, params), limit)

    def initialize(self, limit=GUARD, **params):
        r = self.call("initialize", {"cwd": self.home.project, **params}, limit)
        assert "result" in r, r
        return r

    def tools(self):
        return {t["qualifiedName"]: t for t in self.call("tools/list")["result"]["tools"]}

    def tool(self, name, input=None, limit=GUARD, **extra):
        return self.call("tools/call", {"tool": name, "input": input or {}, **extra}, limit)

    def close(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass

    def shutdown(self, limit=GUARD):
        """`shutdown`, then the exit code."""
        r = self.call("shutdown", limit=limit)
        assert r.get("result") == {"status": "ok"}, r
        return self.proc.wait(timeout=limit)
