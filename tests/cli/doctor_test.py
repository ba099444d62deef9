#!/usr/bin/env python3
"""`dhara doctor` (the health report) and `dhara doctor --audit-log --follow`, run as a user
would on a throwaway home. The kernel facts the report prints are checked against what this
script observes itself (Landlock through syscall 444, a seccomp filter and a user namespace
probed in a forked child).

Usage: doctor_test.py DHARA_BINARY SOURCE_ROOT
Prints `N passed, M failed` last; exits 1 on any failure.
"""
import ctypes
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the shared runner beside this file)

DHARA = os.path.abspath(sys.argv[1])
WAIT = 30  # seconds to wait for a line to appear (generous: shared, loaded machines)


class Home:
    """A DHARA_HOME with one extension (python3, declares filesystem:read) and a project."""

    def __init__(self, approved=True, config=None):
        self.root = tempfile.mkdtemp(prefix="dhara-doctor-")
        self.home = os.path.join(self.root, "home")
        self.dh = os.path.join(self.home, ".dhara")
        self.project = os.path.join(self.root, "project")
        ext = os.path.join(self.dh, "extensions", "hello")
        os.makedirs(ext)
        os.makedirs(self.project)
        self.write_json(os.path.join(ext, "manifest.json"), {
            "name": "hello", "version": "1.0.0", "author": "tester",
            "runtime": {"type": "subprocess", "command": "python3 main.py"},
            "capabilities": ["filesystem:read"]})
        open(os.path.join(ext, "main.py"), "w").write("raise SystemExit('doctor must not start extensions')\n")
        if approved:
            self.write_json(os.path.join(self.dh, "permissions.json"), {
                "hello": {"version": "1.0.0", "capabilities": {"filesystem:read": "approved"}}})
        if config is not None:
            self.write_json(os.path.join(self.dh, "config.json"), config)
        self.env = {"HOME": self.home, "DHARA_HOME": self.dh, "PATH": os.environ["PATH"]}

    @staticmethod
    def write_json(path, value):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(value, f, indent=2)

    def dhara(self, *args, env=None):
        p = subprocess.run([DHARA, *args], cwd=self.project, env=env or self.env, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=120, start_new_session=True)
        return p.returncode, p.stdout, p.stderr

    def report(self):
        code, out, err = self.dhara("doctor", "--json")
        try:
            return code, json.loads(out), err
        except ValueError:
            raise AssertionError(f"--json is not one JSON object (exit {code}): {out!r} {err!r}")

    def change(self, verb, cap="filesystem:read"):
        code, out, err = self.dhara("config", "permissions", verb, "hello", cap)
        assert code == 0, (verb, code, out, err)

    def close(self):
        shutil.rmtree(self.root, ignore_errors=True)


def tree_state(root):
    """Every path under root with its type, size, mode and mtime: doctor must change none."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            state[p] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return state


# ---- what the kernel offers, observed from Python ------------------------------------------------

LIBC = ctypes.CDLL(None, use_errno=True)


def landlock_abi():
    LIBC.syscall.restype = ctypes.c_long
    abi = LIBC.syscall(ctypes.c_long(444), None, ctypes.c_long(0), ctypes.c_long(1))  # CREATE_RULESET_VERSION
    return abi if abi > 0 else 0


def in_child(body):
    """Runs body() in a forked child; True when it returned without raising."""
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if body() else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def seccomp_works():
    class sock_filter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]

    class sock_fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(sock_filter))]

    def body():
        prog_code = (sock_filter * 1)(sock_filter(0x06, 0, 0, 0x7FFF0000))  # BPF_RET|BPF_K, SECCOMP_RET_ALLOW
        prog = sock_fprog(1, prog_code)
        if LIBC.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            return False
        return LIBC.prctl(22, 2, ctypes.byref(prog), 0, 0) == 0  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER

    return in_child(body)


def user_namespaces_work():
    uid, gid = os.geteuid(), os.getegid()  # before unshare: afterwards they read as the overflow id

    def write(path, text):
        with open(path, "w") as f:
            f.write(text)

    def body():
        if LIBC.unshare(0x10000000 | 0x00020000) != 0:  # CLONE_NEWUSER | CLONE_NEWNS
            return False
        write("/proc/self/setgroups", "deny")
        write("/proc/self/uid_map", f"{uid} {uid} 1\n")
        write("/proc/self/gid_map", f"{gid} {gid} 1\n")
        if LIBC.mount(None, b"/", None, ctypes.c_ulong(0x4000 | 0x40000), None) != 0:  # MS_REC | MS_PRIVATE
            return False
        flags = 1 | 2 | 4 | 8  # MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
        return LIBC.mount(b"tmpfs", b"/", b"tmpfs", ctypes.c_ulong(flags), b"mode=000") == 0

    return in_child(body)


# ---- a running `doctor --audit-log --follow` ------------------------------------------------------

class Follower:
    def __init__(self, home, *args):
        self.p = subprocess.Popen([DHARA, "doctor", "--audit-log", "--follow", *args], cwd=home.project, env=home.env,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  start_new_session=True)
        self.lines = queue.Queue()
        self.seen = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, predicate, what):
        """Lines up to and including the first that matches; fails after WAIT seconds."""
        got = []
        while True:
            try:
                line = self.lines.get(timeout=WAIT)
            except queue.Empty:
                raise AssertionError(f"no line with {what} within {WAIT}s; got {self.seen[-20:]}")
            if line is None:
                raise AssertionError(f"follow ended before {what}; got {self.seen[-20:]}; stderr {self.p.stderr.read()}")
            self.seen.append(line)
            got.append(line)
            if predicate(line):
                return got

    def stop(self, sig=signal.SIGINT):
        self.p.send_signal(sig)
        try:
            return self.p.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.p.kill()
            raise AssertionError(f"doctor --follow did not stop on {sig!r}")


# ---- the health report ---------------------------------------------------------------------------

def test_healthy_home_exits_0_and_the_report_names_each_part():
    h = Home(config={"security": {"level": "standard"}})
    h.change("revoke")
    h.change("approve")  # an audit trail of two verified entries
    before = tree_state(h.root)
    code, out, err = h.dhara("doctor")
    assert code == 0, (code, out, err)
    for part in ["Config", os.path.join(h.dh, "config.json"), "level", "standard", "Warnings",
                 "Extensions (checked, not started", os.path.join(h.dh, "extensions"), "hello 1.0.0",
                 "ready to start", "Permissions", os.path.join(h.dh, "permissions.json"), "1 extension recorded",
                 "Audit trail", "2 entries, seq 1 to 2", "hash chain verified in", "OS sandbox:",
                 "No problems found."]:
        assert part in out, (part, out)
    assert "\033[" not in out, "colour on a pipe"
    assert tree_state(h.root) == before, "doctor changed a file"
    code, rep, _ = h.report()
    assert code == 0 and rep["healthy"] is True and rep["problems"] == [], rep
    assert rep["config"]["global"]["state"] == "valid" and rep["config"]["project"]["state"] == "absent", rep
    assert rep["config"]["level"] == "standard" and rep["config"]["projectTrusted"] is False, rep
    assert rep["permissions"]["state"] == "valid" and rep["permissions"]["entries"] == 1, rep
    assert rep["audit"]["verified"] is True and rep["audit"]["entries"] == 2 and rep["audit"]["lastSeq"] == 2, rep
    ext = rep["extensions"]
    assert ext["checked"] is True and ext["started"] is False, ext
    (hello,) = ext["found"]
    assert hello["name"] == "hello" and hello["state"] == "ready" and hello["ready"] is True, hello
    assert hello["capabilities"] == {"approved": ["filesystem:read"], "pending": [], "denied": []}, hello
    assert os.path.isabs(hello["executable"]), hello
    assert tree_state(h.root) == before, "doctor --json changed a file"
    h.close()


def test_a_fresh_home_with_nothing_yet_is_healthy():
    h = Home(approved=False)
    shutil.rmtree(h.dh)
    code, rep, err = h.report()
    assert code == 0, (rep, err)
    assert rep["config"]["global"]["state"] == "absent" and rep["permissions"]["state"] == "absent", rep
    assert rep["audit"]["present"] is False and rep["extensions"]["found"] == [], rep
    assert not os.path.exists(h.dh), "doctor created DHARA_HOME"
    h.close()


def test_pending_capabilities_block_but_are_not_a_problem():
    h = Home(approved=False)
    code, out, _ = h.dhara("doctor")
    assert code == 0, out
    assert "blocked" in out and "pending filesystem:read" in out and \
        "dhara config permissions approve hello --all" in out, out
    h.close()


def test_malformed_config_exits_1_with_file_line_and_column():
    h = Home()
    path = os.path.join(h.dh, "config.json")
    open(path, "w").write('{\n  "security": {\n    "level": "standard",,\n  }\n}\n')
    code, out, err = h.dhara("doctor")
    assert code == 1, (code, out, err)
    problems = out[out.index("Problems (") :]
    assert re.search(re.escape(path) + r":3:\d+", problems), out
    assert "Extensions" in out and "dhara refuses to start until the config is fixed" in out, out
    code, rep, _ = h.report()
    assert code == 1 and rep["config"]["global"]["state"] == "invalid", rep
    assert re.search(re.escape(path) + r":3:\d+", rep["config"]["global"]["error"]), rep
    assert rep["extensions"]["checked"] is False and "sandbox" in rep, rep
    assert open(path).read().startswith('{\n  "security"'), "doctor rewrote the config"
    h.close()


def test_a_wrong_value_in_the_config_is_a_problem():
    h = Home(config={"security": {"level": "careless"}})
    code, out, _ = h.dhara("doctor")
    assert code == 1 and "careless" in out[out.index("Problems (") :], out
    h.close()


def test_corrupt_or_unreadable_permissions_exit_1():
    h = Home()
    path = os.path.join(h.dh, "permissions.json")
    open(path, "w").write('{"hello": {"version": "1.0.0", "capabilities": {"filesystem:read": "approved"}\n')
    code, out, err = h.dhara("doctor")
    assert code == 1, (code, out, err)
    assert "INVALID" in out and path in out[out.index("Problems (") :], out
    code, rep, _ = h.report()
    assert rep["permissions"]["state"] == "invalid" and path in rep["permissions"]["error"], rep
    assert rep["extensions"]["checked"] is False, rep
    os.remove(path)
    os.symlink(os.path.join(h.root, "elsewhere.json"), path)  # dhara never follows a link for its state
    code, rep, _ = h.report()
    assert code == 1 and rep["permissions"]["state"] == "unreadable", rep
    assert any("symbolic link" in p for p in rep["problems"]), rep
    h.close()


def test_state_others_can_write_is_a_problem():
    h = Home()
    os.chmod(h.dh, 0o777)
    code, rep, _ = h.report()
    assert code == 1 and any(h.dh in p and "chmod go-w" in p for p in rep["problems"]), rep
    os.chmod(h.dh, 0o700)
    os.chmod(os.path.join(h.dh, "permissions.json"), 0o664)
    code, rep, _ = h.report()
    assert code == 1 and any("permissions.json is writable by its group" in p for p in rep["problems"]), rep
    h.close()


def test_an_audit_trail_of_one_entry_is_counted_in_words():
    h = Home()
    h.change("revoke")
    code, out, _ = h.dhara("doctor")
    assert code == 0 and "1 entry, seq 1 to 1" in out and "1 entries" not in out, out
    h.close()


def test_a_tampered_audit_line_exits_1_naming_it():
    h = Home()
    for verb in ["revoke", "approve", "revoke"]:
        h.change(verb)
    path = os.path.join(h.dh, "audit.jsonl")
    lines = open(path).read().splitlines(keepends=True)
    open(path, "w").write(lines[0] + lines[1].replace('"allowed"', '"denied" ') + lines[2])
    code, out, _ = h.dhara("doctor")
    assert code == 1, out
    assert "BROKEN" in out and f"{path} line 2" in out[out.index("Problems (") :], out
    assert "the 1 entry before it verified (seq 1 to 1)" in out, out
    code, rep, _ = h.report()
    brk = rep["audit"]["break"]
    assert rep["audit"]["verified"] is False and brk["file"] == path and brk["line"] == 2, rep
    assert rep["audit"]["entries"] == 1, rep
    h.close()


def test_audit_lines_that_are_not_json_are_counted_in_a_warning():
    h = Home()
    for verb in ["revoke", "approve"]:
        h.change(verb)
    path = os.path.join(h.dh, "audit.jsonl")
    good = open(path).read()
    for broken, said in [("not json\n", "1 audit line is not JSON"),
                         ("not json\n{\n", "2 audit lines are not JSON")]:
        open(path, "w").write(good + broken)
        code, out, err = h.dhara("doctor", "--audit-log")
        assert f"dhara: warning: {said}; run 'dhara doctor --audit-log --verify'\n" in err, (code, out, err)
    h.close()


def test_every_entry_with_n_0_is_listed_as_read_in_bounded_memory():
    """-n 0 lists every entry. It held every line parsed first: 1.1 GB for a trail of 152 MB
    (a review). Now each is printed as it is read; the table's columns are fixed as --follow's."""
    h = Home()
    for verb in ["revoke", "approve"]:
        h.change(verb)
    path = os.path.join(h.dh, "audit.jsonl")
    first, second = open(path).read().splitlines(keepends=True)
    count = 200_000  # ~60 MB: listing does not verify, so the same lines will do
    with open(path, "w") as f:
        for _ in range(count // 2):
            f.write(first)
            f.write(second)
    size_mib = os.path.getsize(path) >> 20
    sanitized = b"libasan" in open(DHARA, "rb").read()
    for args, lines in [(["--json"], count), ([], count + 1)]:
        p = subprocess.Popen([DHARA, "doctor", "--audit-log", "-n", "0", *args], cwd=h.project, env=h.env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        seen, head, peak_kib = 0, b"", 0
        for line in p.stdout:
            if seen < 2:
                head += line
            seen += 1
            if seen == lines * 9 // 10:  # doctor waits to write the rest (megabytes): it still runs
                peak_kib = harness.vm_hwm_kib(p.pid)
        err = p.stderr.read()
        assert p.wait() == 0 and seen == lines, (args, p.returncode, seen, err)
        if args:
            assert json.loads(head.splitlines()[0])["action"] == "denied", head
        else:
            assert head.startswith(b"TIME") and b"hello" in head.splitlines()[1], head
        peak_mib = peak_kib >> 10
        assert peak_kib > 0, "VmHWM was not read"
        print(f"     -n 0 {' '.join(args) or '(table)'}: {seen} lines of a {size_mib} MiB trail, peak RSS {peak_mib} MiB")
        if not sanitized:  # AddressSanitizer's quarantine alone holds 256 MiB
            assert peak_mib < 48, f"doctor took {peak_mib} MiB to list a {size_mib} MiB trail"
    h.close()


def test_an_untrusted_project_loosening_is_a_warning():
    h = Home()
    Home.write_json(os.path.join(h.project, ".dhara", "config.json"), {"security": {"level": "yolo"}})
    os.makedirs(os.path.join(h.project, ".dhara", "extensions", "local"))
    code, out, _ = h.dhara("doctor")
    assert code == 0, out  # a warning, not a problem: the loosening was ignored
    warnings = out[out.index("Warnings") : out.index("Extensions")]
    assert "yolo" in warnings and "trustedProjects" in warnings, out
    assert "not trusted" in out and "standard" in out, out
    assert "skipped" in out and "trusted project" in out, out  # the project extension, by design
    code, rep, _ = h.report()
    assert rep["config"]["level"] == "standard" and rep["config"]["projectTrusted"] is False, rep
    assert rep["config"]["project"]["state"] == "valid", rep
    assert any("trustedProjects" in w for w in rep["warnings"]), rep
    # Trusted, the same file takes effect and no warning is left.
    Home.write_json(os.path.join(h.dh, "config.json"), {"security": {"trustedProjects": [h.project]}})
    code, rep, _ = h.report()
    assert rep["config"]["level"] == "yolo" and rep["config"]["projectTrusted"] is True, rep
    assert not any("trustedProjects" in w for w in rep["warnings"]), rep
    h.close()


def test_an_extension_whose_command_cannot_be_found_fails():
    h = Home()
    Home.write_json(os.path.join(h.dh, "extensions", "broken", "manifest.json"), {
        "name": "broken", "version": "0.1.0",
        "runtime": {"type": "subprocess", "command": "no-such-interpreter-dhara main.py"}, "capabilities": []})
    Home.write_json(os.path.join(h.dh, "extensions", "bad", "manifest.json"), {"name": "bad"})
    code, out, _ = h.dhara("doctor")
    assert code == 1 and "FAILED" in out and "no-such-interpreter-dhara" in out, out
    problems = out[out.index("Problems (") :]
    assert "broken" in problems and os.path.join(h.dh, "extensions", "bad") in problems, problems
    code, rep, _ = h.report()
    states = {e["name"]: e["state"] for e in rep["extensions"]["found"]}
    assert states == {"broken": "failed", "hello": "ready"}, rep
    assert [s["folder"] for s in rep["extensions"]["skipped"]] == [os.path.join(h.dh, "extensions", "bad")], rep
    h.close()


def test_the_sandbox_section_matches_what_the_kernel_offers():
    h = Home()
    code, rep, _ = h.report()
    sb = rep["sandbox"]
    abi, seccomp, userns = landlock_abi(), seccomp_works(), user_namespaces_work()
    assert sb["landlockAbi"] == abi, (sb, abi)
    assert sb["seccomp"] == seccomp, (sb, seccomp)
    assert sb["userNamespaces"] == userns, (sb, userns)
    if not seccomp:
        level = "filesystem-only" if abi > 0 else "none"
    else:
        level = "full" if abi >= 6 and userns else "partial"
    assert sb["level"] == level, (sb, level)
    assert (sb["losses"] == []) == (level == "full"), sb
    if abi == 0:
        assert any(l["missing"] == "no Landlock" for l in sb["losses"]) and sb["landlockDetail"], sb
    if not userns:
        assert any(l["missing"] == "no user namespaces" for l in sb["losses"]) and sb["userNamespacesDetail"], sb
    code, out, _ = h.dhara("doctor")
    assert f"OS sandbox: {level}" in out, out
    assert (f"Landlock ABI {abi}" in out) if abi else ("Landlock: " in out), out
    assert ("seccomp filters" in out) == seccomp and ("user namespaces (unshare" in out) == userns, out
    assert "extensions start through " in out and "dhara-launch" in out, out
    h.close()


def hiding_filter(hide_seccomp, only_fsopen=False):
    """A preexec_fn installing a seccomp filter (x86_64) that makes the kernel look poorer: the
    Landlock syscall fails with ENOSYS, unshare with EPERM and, if asked, seccomp itself is
    refused (seccomp(2) ENOSYS, prctl(PR_SET_SECCOMP) EINVAL). With `only_fsopen`, fsopen(2)
    alone fails with ENOSYS (a container profile that does not list the new mount API)."""
    ld, jeq, ret = 0x20, 0x15, 0x06
    errno_ret = lambda e: 0x00050000 | e  # SECCOMP_RET_ERRNO
    prog = [("ld", 4), ("jeq", 0xC000003E, None, "allow"), ("ld", 0)]
    prog += [("jeq", 430, "enosys", None)] if only_fsopen else [("jeq", 444, "enosys", None), ("jeq", 272, "eperm", None)]
    if hide_seccomp:
        prog += [("jeq", 317, "enosys", None), ("jeq", 157, None, "allow"), ("ld", 16),
                 ("jeq", 22, "einval", "allow")]
    labels = {"allow": 0x7FFF0000, "enosys": errno_ret(38), "eperm": errno_ret(1), "einval": errno_ret(22)}
    at = {name: len(prog) + i for i, name in enumerate(labels)}
    code = []
    for pc, ins in enumerate(prog):
        if ins[0] == "ld":
            code.append((ld, 0, 0, ins[1]))
        else:
            off = lambda target: 0 if target is None else at[target] - pc - 1
            code.append((jeq, off(ins[2]), off(ins[3]), ins[1]))
    code += [(ret, 0, 0, k) for k in labels.values()]

    class sock_filter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]

    class sock_fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(sock_filter))]

    filters = (sock_filter * len(code))(*[sock_filter(*c) for c in code])
    fprog = sock_fprog(len(code), filters)

    def install():
        if LIBC.prctl(38, 1, 0, 0, 0) != 0 or LIBC.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:
            os._exit(99)

    return install


def test_a_refused_new_mount_api_is_missing_user_namespaces_for_file_masks():
    # The launcher masks a denied file by descriptor (fsopen, fsmount, open_tree, mount_setattr,
    # move_mount). A seccomp filter that refuses fsopen left doctor saying "full" while every
    # start that masks a file failed.
    import platform
    if platform.machine() != "x86_64" or not seccomp_works() or not user_namespaces_work():
        print("  (skipped: needs x86_64, seccomp and user namespaces)")
        return
    h = Home()
    try:
        p = subprocess.run([DHARA, "doctor", "--json"], cwd=h.project, env=h.env, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=120, preexec_fn=hiding_filter(False, only_fsopen=True))
        sb = json.loads(p.stdout)["sandbox"]
        assert sb["userNamespaces"] is False and "new mount API" in sb["userNamespacesDetail"], sb
        assert "Function not implemented" in sb["userNamespacesDetail"], sb
        p = subprocess.run([DHARA, "doctor", "--json"], cwd=h.project, env=h.env, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=120)
        assert json.loads(p.stdout)["sandbox"]["userNamespaces"] is True, p.stdout
    finally:
        h.close()


def test_a_poorer_kernel_lowers_the_level_and_says_what_is_lost():
    import platform
    if platform.machine() != "x86_64" or not seccomp_works():
        print("  (skipped: needs x86_64 and seccomp to simulate a poorer kernel)")
        return
    h = Home()

    def listed_without_landlock():
        """`extensions list --json` on the poorer kernel: the extensions by name, and the run."""
        p = subprocess.run([DHARA, "--no-prompt", "extensions", "list", "--json"], cwd=h.project, env=h.env,
                           capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120,
                           preexec_fn=hiding_filter(False))
        return {e["name"]: e for e in json.loads(p.stdout) if "name" in e}, p

    def report(hide_seccomp):
        p = subprocess.run([DHARA, "doctor", "--json"], cwd=h.project, env=h.env, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=120, preexec_fn=hiding_filter(hide_seccomp))
        return p.returncode, json.loads(p.stdout)

    code, rep = report(False)
    sb = rep["sandbox"]
    assert sb["landlockAbi"] == 0 and "no Landlock" in sb["landlockDetail"], sb
    assert sb["userNamespaces"] is False and "unshare" in sb["userNamespacesDetail"], sb
    assert sb["seccomp"] is True and sb["seccompInherited"] is True, sb
    assert sb["level"] == "partial", sb
    missing = [l["missing"] for l in sb["losses"]]
    assert missing == ["no Landlock", "no user namespaces"], sb
    # Extensions start only through the launcher, which needs Landlock and seccomp: with the
    # sandbox required (the default) a kernel without Landlock is a problem.
    assert code == 1 and any("cannot apply it: no Landlock" in p and "so no extension starts" in p
                             for p in rep["problems"]), rep
    # And so it is: the extension does not start, and says why (fail closed).
    listed, p = listed_without_landlock()
    assert listed["hello"]["state"] == "failed", listed
    assert "the OS sandbox cannot be applied: no Landlock" in listed["hello"]["reason"], listed
    code, rep = report(True)
    sb = rep["sandbox"]
    assert sb["seccomp"] is False and "seccomp" in sb["seccompDetail"] and sb["level"] == "none", sb
    assert [l["missing"] for l in sb["losses"]] == ["no Landlock", "no seccomp", "no user namespaces"], sb
    assert code == 1 and any("requireOsSandbox" in p for p in rep["problems"]), rep
    Home.write_json(os.path.join(h.dh, "config.json"), {"security": {"requireOsSandbox": False}})
    code, rep = report(True)
    assert code == 0 and rep["sandbox"]["level"] == "none", rep
    # Not required: the extension starts, confined by the broker only, with a warning.
    listed, p = listed_without_landlock()
    # (the fixture's main.py is not a real extension: it was started, which is the point)
    assert "OS sandbox" not in listed["hello"].get("reason", ""), (listed, p.stderr)
    assert "hello runs without an OS sandbox" in p.stderr, p.stderr
    h.close()


def test_usage_errors_exit_2():
    h = Home()
    code, _, err = h.dhara("doctor", "--follow")
    assert code == 2 and "--audit-log" in err, err
    code, _, err = h.dhara("doctor", "--audit-log", "--follow", "--verify")
    assert code == 2 and "--follow" in err, err
    code, _, err = h.dhara("doctor", "--extension", "hello", "-n", "5")  # every filter given, in the order of --help
    assert (code, err) == (2, "dhara: --extension works only with --audit-log; run: "
                              "dhara doctor --audit-log --extension hello -n 5\n"), err
    code, _, err = h.dhara("doctor", "--denied-only")
    assert code == 2 and "--denied-only" in err, err
    h.close()


def test_no_colour_with_no_color_even_on_a_terminal():
    import pty
    h = Home()
    env = dict(h.env, NO_COLOR="1", TERM="xterm")
    for args, colour in [(["doctor"], False), (["doctor", "--audit-log"], False)]:
        master, slave = pty.openpty()
        p = subprocess.Popen([DHARA, *args], cwd=h.project, env=env, stdin=subprocess.DEVNULL, stdout=slave,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        os.close(slave)
        out = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        p.wait(timeout=WAIT)
        os.close(master)
        assert (b"\033[" in out) == colour, (args, out)
    # Without NO_COLOR, a terminal gets colour.
    h.change("revoke")
    master, slave = pty.openpty()
    p = subprocess.Popen([DHARA, "doctor", "--audit-log"], cwd=h.project, env=dict(h.env, TERM="xterm"),
                         stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.DEVNULL, start_new_session=True)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    p.wait(timeout=WAIT)
    os.close(master)
    assert b"\033[31mdenied\033[0m" in out and b"TIME (UTC)" in out, out
    h.close()


# ---- --follow ------------------------------------------------------------------------------------

def test_follow_streams_new_entries_and_stops_on_sigint():
    h = Home()
    h.change("revoke")
    f = Follower(h)
    f.wait_for(lambda l: "revoked by the user" in l or "revoke" in l, "the existing entry")
    h.change("approve")
    got = f.wait_for(lambda l: "approve" in l and "allowed" in l, "the appended approval")
    assert got[-1].split()[1] == "hello" and got[-1].split()[2] == "filesystem:read", got
    assert f.stop(signal.SIGINT) == 0
    h.close()


def test_follow_started_on_an_empty_trail_lines_its_columns_up():
    # Started before any entry, the header's TIME was 4 wide and every column after it 20
    # characters left of its rows (a review).
    h = Home()
    f = Follower(h)
    header = f.wait_for(lambda l: l.startswith("TIME"), "the header")[-1]
    h.change("approve")
    row = f.wait_for(lambda l: "allowed" in l, "the appended approval")[-1]
    for column in ("EXTENSION", "CAPABILITY", "ACTION"):
        value = {"EXTENSION": "hello", "CAPABILITY": "filesystem:read", "ACTION": "allowed"}[column]
        assert header.index(column) == row.index(value), (header, row)
    assert f.stop(signal.SIGINT) == 0
    h.close()


def test_a_skipped_extension_is_named_with_the_extensions_not_again_under_warnings():
    # Sessions warn of an installed extension whose manifest broke; doctor lists it with the
    # extensions and as a problem, and so named it a third time under Warnings (a review).
    h = Home()
    junk = os.path.join(h.dh, "extensions", "junk")
    os.makedirs(junk)
    code, out, err = h.dhara("doctor")
    assert code == 1 and f"SKIPPED   {junk}: " in out and f"extension folder {junk} skipped: " in out, (code, out, err)
    assert f"the extension in {junk} is skipped" not in out, out
    h.close()


def test_filters_say_how_to_run_them_and_refuse_an_empty_value():
    h = Home()
    h.change("approve")
    code, _, err = h.dhara("doctor", "--since", "2026-12-07 10:00")
    assert (code, err) == (2, "dhara: --since works only with --audit-log; run: "
                              "dhara doctor --audit-log --since '2026-12-07 10:00'\n"), err
    code, _, err = h.dhara("doctor", "--denied-only")
    assert (code, err) == (2, "dhara: --denied-only works only with --audit-log; run: dhara doctor --audit-log --denied-only\n"), err
    # An empty value (a script's unset variable) listed every entry, exit 0.
    for flag, what in (("--since", "a duration"), ("--extension", "an extension's name")):
        code, out, err = h.dhara("doctor", "--audit-log", flag, "")
        assert (code, out) == (2, "") and f"{flag} was given an empty value; give it {what}" in err, (code, out, err)
    h.close()


def test_follow_json_survives_rotation_and_sigterm():
    h = Home(config={"security": {"audit": {"maxBytes": 4096, "keep": 2}}})
    h.change("revoke")
    f = Follower(h, "--json")
    first = json.loads(f.wait_for(lambda l: True, "the existing entry")[-1])
    assert first["seq"] == 1, first
    for i in range(40):  # ~12 lines a file: several rotations, some between two reads
        h.change("approve" if i % 2 == 0 else "revoke")
    f.wait_for(lambda l: json.loads(l)["seq"] == 41, "seq 41")
    seqs = [json.loads(l)["seq"] for l in f.seen]
    assert seqs == list(range(1, 42)), seqs  # none lost, none twice, in order
    assert os.path.exists(os.path.join(h.dh, "audit.2.jsonl")), os.listdir(h.dh)
    assert f.stop(signal.SIGTERM) == 0
    code, rep, _ = h.report()  # the report after rotation: anchored chain, several files
    assert code == 0 and rep["audit"]["verified"] and len(rep["audit"]["files"]) == 3, rep
    h.close()


def test_follow_says_which_entries_were_rotated_away_before_it_read_them():
    """With keep 1, a follower held still while three files' worth of entries are written
    cannot read them all: it said nothing of the ones that were gone (a review)."""
    h = Home(config={"security": {"audit": {"maxBytes": 4096, "keep": 1}}})
    h.change("revoke")
    f = Follower(h, "--json")
    assert json.loads(f.wait_for(lambda l: True, "the existing entry")[-1])["seq"] == 1
    f.p.send_signal(signal.SIGSTOP)
    try:
        for i in range(50):  # ~12 lines a file: audit.1 and audit.jsonl keep the last ~25
            h.change("approve" if i % 2 == 0 else "revoke")
    finally:
        f.p.send_signal(signal.SIGCONT)
    f.wait_for(lambda l: json.loads(l)["seq"] == 51, "seq 51")
    seqs = [json.loads(l)["seq"] for l in f.seen]
    # The rest of the file it had open, then a jump to the oldest file still kept.
    jump = next(i for i in range(1, len(seqs)) if seqs[i] != seqs[i - 1] + 1)
    assert seqs[:jump] == list(range(1, jump + 1)) and seqs[jump:] == list(range(seqs[jump], 52)), seqs
    assert f.stop(signal.SIGTERM) == 0
    err = f.p.stderr.read()
    assert f"dhara: warning: entries {jump + 1} to {seqs[jump] - 1} were rotated away before they could be read\n" in err, err
    h.close()


def test_follow_filters_like_the_listing():
    h = Home()
    f = Follower(h, "--denied-only", "--json")
    h.change("approve")
    h.change("revoke")
    line = json.loads(f.wait_for(lambda l: True, "a denial")[-1])
    assert line["action"] == "denied" and line["details"]["change"] == "revoke", line
    assert f.stop() == 0 and len(f.seen) == 1, f.seen
    h.close()


def test_follow_ends_when_the_reader_closes_the_pipe():
    h = Home()
    h.change("revoke")
    p = subprocess.Popen([DHARA, "doctor", "--audit-log", "--follow"], cwd=h.project, env=h.env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    p.stdout.readline()  # the header: it is following now
    p.stdout.close()
    try:
        code = p.wait(timeout=WAIT)
    except subprocess.TimeoutExpired:
        p.kill()
        raise AssertionError("doctor --follow kept running after its reader went away")
    assert code == 0, code
    h.close()


if __name__ == "__main__":
    harness.run(globals())
