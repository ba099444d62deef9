#!/usr/bin/env python3
"""Capability prompts on a real terminal (a pty), answered the way a person would.

Usage: prompt_test.py DHARA_BINARY TEST_EXTENSIONS_DIR
Prints `N passed, M failed` last; exits 1 on any failure.
"""
import json
import os
import pty
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the shared runner beside this file)

DHARA, EXTENSIONS = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])


def session(config, keys, prepare=None):
    """Runs `dhara run --calls` on a pty with fs-tool pending; answers each prompt with the
    next key. Returns (exit code, everything the terminal showed, permissions.json or None)."""
    root = tempfile.mkdtemp(prefix="dhara-prompt-")
    try:
        home = os.path.join(root, "home")
        dh = os.path.join(home, ".dhara")
        project = os.path.join(root, "project")
        shutil.copytree(os.path.join(EXTENSIONS, "fs-tool"), os.path.join(dh, "extensions", "fs-tool"))
        os.makedirs(os.path.join(project, "src"))
        with open(os.path.join(project, "src", "a.txt"), "w") as f:
            f.write("project text\n")
        if config:
            with open(os.path.join(dh, "config.json"), "w") as f:
                json.dump(config, f)
        if prepare:
            prepare(dh)
        calls = os.path.join(root, "calls.jsonl")
        with open(calls, "w") as f:
            f.write('{"tool": "read", "input": {"path": "src/a.txt"}}\n')
        pid, fd = pty.fork()
        if pid == 0:
            try:
                os.chdir(project)
                os.execve(DHARA, [DHARA, "run", "--calls", calls],
                          {"HOME": home, "DHARA_HOME": dh, "PATH": os.environ.get("PATH", "/usr/bin:/bin")})
            finally:
                os._exit(127)  # never run the test runner twice
        shown, pending = b"", list(keys)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break  # the child closed the terminal
            if not chunk:
                break
            shown += chunk
            while pending and shown.count(b"Approve? (y/n") > len(keys) - len(pending):  # (y/n) or (y/n/q)
                os.write(fd, pending.pop(0).encode())
        _, status = os.waitpid(pid, 0)
        perms_path = os.path.join(dh, "permissions.json")
        perms = json.load(open(perms_path)) if os.path.exists(perms_path) else None
        return os.waitstatus_to_exitcode(status), shown.decode(errors="replace"), perms
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_standard_yes():
    code, shown, perms = session(None, ["y"])
    assert "fs-tool v1.0.0 (dhara tests) requests filesystem:read\r\nApprove? (y/n) y" in shown, shown
    assert code == 0, (code, shown)
    assert "project text" in shown, shown  # the call ran after the approval
    assert perms["fs-tool"]["capabilities"] == {"filesystem:read": "approved"}, perms
    assert perms["fs-tool"]["version"] == "1.0.0", perms
    assert perms["fs-tool"]["folder"].endswith("/extensions/fs-tool"), perms


def test_standard_no():
    code, shown, perms = session(None, ["n"])
    assert code == 3, (code, shown)  # the call was denied
    assert perms["fs-tool"]["capabilities"] == {"filesystem:read": "denied"}, perms


def test_paranoid_one_prompt_per_capability_with_meaning():
    code, shown, perms = session({"security": {"level": "paranoid"}}, ["y"])
    assert "fs-tool v1.0.0 (dhara tests) requests filesystem:read — read files inside the allowed paths" in shown, shown
    assert code == 0, (code, shown)


def test_an_answer_that_cannot_be_audited_records_nothing():
    # With the trail unwritable, a `y` was saved all the same, with no entry: later sessions
    # allowed what no line of the trail showed approved (a review).
    # The capability stays pending, so the call asks again (answered n).
    code, shown, perms = session(None, ["y", "n"], prepare=lambda dh: os.makedirs(os.path.join(dh, "audit.jsonl")))
    assert "cannot audit the answers for fs-tool" in shown and "nothing was recorded" in shown, shown
    assert perms is None or "fs-tool" not in perms, perms
    assert code == 3 and "project text" not in shown, (code, shown)  # no decision without its entry


def test_quit():
    code, shown, perms = session(None, ["q"])
    assert code == 130, (code, shown)
    assert perms is None or "fs-tool" not in perms, perms  # nothing recorded


if __name__ == "__main__":
    harness.run(globals())
