#!/usr/bin/env python3
"""Faults with real processes (issue 8, DESIGN §8): dhara killed mid-batch, an audit log that
cannot be written, a hostile permissions.json, concurrent permission changes under a running
session. Hostile extensions are in faults_extensions_test.py, load in load_test.py.

Every time limit is a hang guard (the test fails instead of blocking ctest), never a speed
assertion. Usage: faults_test.py DHARA_BINARY SOURCE_ROOT [NAME-PART...]   (registered by tests/CMakeLists.txt)
Prints `N passed, M failed` last; exits 1 on any failure.
"""
import json
import os
import re
import resource
import select
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the shared runner beside this file)
from fault_support import DHARA, GUARD, Home, Serve, gone_from, kill_leftovers, read_audit, running_under  # noqa: E402

AUDIT_FAILED = "the audit log cannot be written"


def echo_batch(n, extensions=1, text="x" * 64):
    """n checked echo calls spread over echo-0…, ids their line numbers (toolCallId call-<id>)."""
    return [{"tool": f"echo-{i % extensions}/echo", "input": {"text": f"{i}:{text}"}} for i in range(1, n + 1)]


# --- SIGKILL mid-batch ----------------------------------------------------------------------------

def sigkill_mid_batch(durability):
    h = Home()
    proc = None
    try:
        for i in range(4):
            h.add_checked_echo(f"echo-{i}")
        h.config({"security": {"audit": {"durability": durability}}})
        calls = os.path.join(h.root, "calls.jsonl")
        with open(calls, "w") as f:
            f.write("".join(json.dumps(c) + "\n" for c in echo_batch(200000, 4)))
        proc = subprocess.Popen([DHARA, "--no-prompt", "run", "--calls", calls, "-j", "32"], cwd=h.project, env=h.env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        # Kill it once a good number of results is out, while many more are in flight.
        out, deadline = b"", time.monotonic() + 60
        while out.count(b"\n") < 3000:
            assert time.monotonic() < deadline, "only %d results in 60 s" % out.count(b"\n")
            ready, _, _ = select.select([proc.stdout], [], [], 1)
            if ready:
                chunk = os.read(proc.stdout.fileno(), 1 << 20)
                assert chunk, f"dhara ended before it was killed (exit {proc.wait()})"
                out += chunk
        os.kill(proc.pid, signal.SIGKILL)
        while chunk := os.read(proc.stdout.fileno(), 1 << 20):  # what it printed before dying
            out += chunk
        assert proc.wait() == -signal.SIGKILL
        printed = [json.loads(l) for l in out.split(b"\n") if l.strip()]  # a torn stdout line would fail here
        assert all(r["status"] == "ok" for r in printed), [r for r in printed if r["status"] != "ok"][:3]
        assert len(printed) < 200000, "the batch finished before the kill: nothing was tested"

        # The file parses line by line and the chain holds; a torn last line is allowed only for
        # a call whose result was not released.
        entries, torn = read_audit(h.dh, allow_torn_tail=True)
        audited = {e["toolCallId"] for e in entries if e.get("action") == "allowed"}
        missing = [r["id"] for r in printed if f"call-{r['id']}" not in audited]
        assert not missing, f"{len(missing)} printed results have no audit entry, e.g. {missing[:5]}"
        if torn:
            m = re.search(rb'"toolCallId":"call-(\d+)"', torn)
            assert m is None or int(m.group(1)) not in {r["id"] for r in printed}, f"torn line of a released call: {torn!r}"
        print(f"     {durability}: {len(printed)} results printed, {len(entries)} entries, "
              f"{len(missing)} lost, torn tail {len(torn)} bytes")

        # The extensions do not outlive the session (EOF on their stdin).
        left = gone_from(h.root)
        assert not left, f"processes left after dhara was killed: {left}"
        # The next session repairs a torn tail, continues the chain, and it verifies.
        code, results, err = h.run_batch(echo_batch(5))
        assert code == 0 and len(results) == 5, (code, err)
        code, report = h.verify()
        assert code == 0, report
        after, torn = read_audit(h.dh)
        assert len(after) >= len(entries) + 5 and torn == b"", (len(after), len(entries))
    finally:
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        h.close()


def test_sigkill_mid_batch_with_write_durability_loses_no_released_entry():
    sigkill_mid_batch("write")


def test_sigkill_mid_batch_with_fsync_durability_loses_no_released_entry():
    sigkill_mid_batch("fsync")


def test_a_killed_session_s_private_folders_go_with_the_next_session_and_a_live_one_keeps_its_own():
    """Each extension gets a private folder under TMPDIR (its temp files). A session killed
    with SIGKILL cannot remove its own; the next dhara removes them (they may hold what the
    extensions wrote), while a running session's folders, and a folder dhara did not mark as
    its own, are left alone."""
    h = Home()
    sessions = []
    try:
        tmp = os.path.join(h.root, "tmp")
        os.makedirs(tmp)
        h.env["TMPDIR"] = tmp
        for i in range(2):
            h.add_checked_echo(f"echo-{i}")
        stranger = "dhara-ext-Abc123"  # named like dhara's, but without its mark
        os.makedirs(os.path.join(tmp, stranger, "tmp"))
        # Marked and locked by nobody, but not to be removed: a link named like dhara's (the
        # sweep never follows one out of TMPDIR) and, where the tests can make one, a folder
        # that belongs to another user.
        elsewhere = os.path.join(h.root, "elsewhere")
        os.makedirs(os.path.join(elsewhere, ".dhara-private"))
        linked = "dhara-ext-Lnk123"
        os.symlink(elsewhere, os.path.join(tmp, linked))
        keep = [stranger, linked]
        if os.geteuid() == 0:
            others = "dhara-ext-Oth123"
            os.makedirs(os.path.join(tmp, others, ".dhara-private"))
            os.chown(os.path.join(tmp, others), 65534, 65534)
            keep.append(others)

        def private():
            return {n for n in os.listdir(tmp) if n.startswith("dhara-ext-") and n not in keep}

        def kept():
            return all(os.path.lexists(os.path.join(tmp, n)) for n in keep) and \
                os.path.isdir(os.path.join(elsewhere, ".dhara-private"))

        killed = Serve(h)
        sessions.append(killed)
        killed.initialize()
        theirs = private()
        assert len(theirs) == 2, theirs  # one for each extension
        for n in theirs:
            assert sorted(os.listdir(os.path.join(tmp, n))) == [".dhara-private", "tmp"], n
        os.killpg(killed.pid, signal.SIGKILL)
        killed.proc.wait()
        assert private() == theirs, "a killed session removed its folders: nothing was tested"

        live = Serve(h)
        sessions.append(live)
        live.initialize()
        mine = private() - theirs
        assert len(mine) == 2 and private() == mine, f"the killed session's folders are left: {private() & theirs}"
        assert kept(), f"a folder that is not this user's, not marked, or a link was removed: {os.listdir(tmp)}"

        code, results, err = h.run_batch(echo_batch(4, 2))  # another session while this one runs
        assert code == 0 and len(results) == 4, (code, err)
        assert private() == mine, "another session removed the folders of a running one"

        live.proc.stdin.close()  # EOF: a clean end, which removes its own
        assert live.proc.wait(timeout=GUARD) == 0
        assert private() == set(), private()
        assert kept(), f"a folder that is not this user's, not marked, or a link was removed: {os.listdir(tmp)}"
    finally:
        for s in sessions:
            s.close()
        h.close()


# --- an audit log that cannot be written ------------------------------------------------------------

def file_size_limit(limit):
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_ctrl_c_while_an_extension_hangs_in_its_handshake_ends_the_run_at_once():
    """Ctrl-C (or SIGTERM) during the start was read only once the batch ran: with an extension
    hanging in initialize, after the whole 10 s handshake. It ends the wait now: exit 130 or
    143, no call ran, every extension stopped."""
    for sig, code in [(signal.SIGINT, 130), (signal.SIGTERM, 143)]:
        h = Home()
        try:
            h.add("hang-init")
            h.add_checked_echo("echo-0")
            calls = os.path.join(h.root, "calls.jsonl")
            with open(calls, "w") as f:
                f.write(json.dumps({"tool": "echo-0/echo", "input": {"text": "never"}}) + "\n")
            proc = subprocess.Popen([DHARA, "--no-prompt", "run", "--calls", calls], cwd=h.project, env=h.env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True)
            # Once hang-init runs, the session waits for its handshake.
            deadline = time.monotonic() + GUARD
            while not running_under(os.path.join(h.dh, "extensions", "hang-init")):
                assert time.monotonic() < deadline and proc.poll() is None, "hang-init never started"
                time.sleep(0.05)
            sent = time.monotonic()
            os.kill(proc.pid, sig)
            out, err = proc.communicate(timeout=GUARD)
            waited = time.monotonic() - sent
            assert proc.returncode == code and out == b"", (proc.returncode, out, err)
            assert b"while the extensions started; no call ran" in err, err
            # A hang guard, not a speed target: the handshake alone lasts 10 s.
            assert waited < 8, f"the run ended {waited:.1f} s after the signal"
            left = gone_from(os.path.join(h.dh, "extensions"))
            assert not left, f"extensions left running: {left}"
            print(f"     {signal.Signals(sig).name}: exit {code} {waited:.2f} s after the signal")
        finally:
            h.close()


def start_run_with_a_hung_call(h, settings):
    """`dhara run` of two calls to hang-ignore-term, `hang` (never answers, ignores SIGTERM)
    and `ok`, with `settings` as config.json; returns the process once `hang` is running."""
    h.add("hang-ignore-term")
    h.config(settings)
    calls = os.path.join(h.root, "calls.jsonl")
    with open(calls, "w") as f:
        f.write(json.dumps({"tool": "hang", "input": {}}) + "\n" + json.dumps({"tool": "ok", "input": {}}) + "\n")
    proc = subprocess.Popen([DHARA, "--no-prompt", "run", "--calls", calls, "-j", "2"], cwd=h.project, env=h.env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    time.sleep(1.5)  # both calls are in flight (`ok` waits behind `hang`: one thread)
    assert proc.poll() is None, proc.communicate()
    return proc


def test_sighup_ends_a_run_like_ctrl_c_with_every_result_line():
    """SIGHUP (a closed terminal, a dropped ssh session) killed `dhara run` by the signal: no
    result line of the calls in flight, no summary, and at yolo an extension left running (a
    review). It is an interrupt now: calls cancelled and reported, exit 129."""
    h = Home()
    try:
        proc = start_run_with_a_hung_call(h, {"security": {"level": "yolo"}})
        os.kill(proc.pid, signal.SIGHUP)
        out, err = proc.communicate(timeout=GUARD)
        lines = sorted((json.loads(l) for l in out.splitlines()), key=lambda l: l["id"])
        assert proc.returncode == 129, (proc.returncode, out, err)
        assert [l["status"] for l in lines] == ["cancelled", "cancelled"], lines  # `ok` waits behind `hang`
        assert b"2 calls in" in err and b"(interrupted)" in err, err
        left = gone_from(os.path.join(h.dh, "extensions"))
        assert not left, f"extensions left running: {left}"
    finally:
        h.close()


def test_sighup_inherited_ignored_stays_ignored():
    """`nohup dhara run` (SIGHUP ignored when dhara starts) ended at the terminal's close once
    SIGHUP became an interrupt (a review): an ignored SIGHUP stays ignored."""
    h = Home()
    try:
        h.add("echo-py")
        calls = os.path.join(h.root, "calls.jsonl")
        with open(calls, "w") as f:
            f.write(json.dumps({"tool": "sleep", "input": {"ms": 2000}}) + "\n")
        proc = subprocess.Popen([DHARA, "--no-prompt", "run", "--calls", calls], cwd=h.project, env=h.env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
        time.sleep(1.0)
        os.kill(proc.pid, signal.SIGHUP)
        out, err = proc.communicate(timeout=GUARD)
        assert proc.returncode == 0 and json.loads(out)["status"] == "ok", (proc.returncode, out, err)
    finally:
        h.close()


def test_a_second_signal_ends_the_run_while_the_extensions_are_stopped():
    """After the first Ctrl-C the extensions are stopped, which for one that ignores cancel and
    SIGTERM takes cancelGraceMs and killGraceMs; a second signal then waited with them (a
    review: 22 s; up to 20 min with the largest settings). It ends the process at once now, and
    ends the extensions with it, also at yolo, where no sandbox would (a review)."""
    for second, code, level in [(signal.SIGINT, 130, None), (signal.SIGTERM, 143, "yolo")]:
        h = Home()
        try:
            settings = {"extensions": {"cancelGraceMs": 60000, "killGraceMs": 60000}}
            if level:
                settings["security"] = {"level": level}
            proc = start_run_with_a_hung_call(h, settings)
            os.kill(proc.pid, signal.SIGINT)
            time.sleep(1.0)  # the batch has ended; the extensions are being stopped
            assert proc.poll() is None, proc.communicate()
            sent = time.monotonic()
            os.kill(proc.pid, second)
            out, err = proc.communicate(timeout=GUARD)  # a hang guard: the graces are 60 s each
            waited = time.monotonic() - sent
            assert proc.returncode == code, (proc.returncode, out, err)
            assert len(out.splitlines()) == 2 and b"(interrupted)" in err, (out, err)  # printed before
            left = gone_from(os.path.join(h.dh, "extensions"))
            assert not left, f"extensions left running: {left}"
            print(f"     then {signal.Signals(second).name}{' at ' + level if level else ''}: exit {code} "
                  f"{waited:.2f} s after it")
        finally:
            kill_leftovers(h.root)
            h.close()


def test_a_host_request_of_a_call_given_up_on_is_credited_to_no_other_call():
    """A call timed out, its work went on in the extension, and its host request came while
    another call was the only one in flight: the audit credited the read to that call, which
    read nothing (a review). With a call given up on still unanswered, no call is named."""
    h = Home()
    try:
        h.add("late-host")
        h.approve_in_file("late-host", "filesystem:read")
        h.config({"extensions": {"callTimeoutMs": 500, "cancelGraceMs": 5000}})
        calls = os.path.join(h.root, "calls.jsonl")
        with open(calls, "w") as f:
            f.write(json.dumps({"id": 1, "tool": "read_later", "input": {"path": "a.txt", "delay_ms": 800}}) + "\n")
            f.write(json.dumps({"id": 2, "tool": "wait", "input": {"ms": 450}}) + "\n")
            f.write(json.dumps({"id": 3, "tool": "read_later", "input": {"path": "a.txt", "delay_ms": 100}}) + "\n")
        # -j 1: call 2 starts when call 1 times out (500 ms) and is alone in flight at 800 ms.
        out = subprocess.run([DHARA, "--no-prompt", "run", "--calls", calls], cwd=h.project, env=h.env,
                             stdin=subprocess.DEVNULL, capture_output=True, timeout=GUARD * 2, start_new_session=True)
        lines = {json.loads(l)["id"]: json.loads(l) for l in out.stdout.splitlines()}
        assert lines[1]["status"] == "cancelled" and lines[2]["status"] == "ok", (out.stdout, out.stderr)
        entries, _ = read_audit(h.dh)
        reads = [e.get("toolCallId", "") for e in entries if e["tool"] == "host/fs/read"]
        # Call 1's late read: no call named. Call 3's, alone in flight once call 1's late answer
        # came: its own.
        assert reads == ["", "call-3"], entries
    finally:
        h.close()


FORGER = r"""
import json, sys
# Answers every call with the error code it is given: dhara's own codes included.
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg or "method" not in msg:
        continue
    if msg["method"] == "initialize":
        out = {"result": {"protocolVersion": "0.1.0", "name": "forger", "version": "1.0.0", "tools": [
            {"name": "fail", "description": "d", "parameters": {"type": "object", "properties": {}}, "capabilities": []}]}}
    elif msg["method"] == "tools/execute":
        code = msg["params"]["input"]["code"]
        out = {"error": {"code": code, "message": "capability denied", "data": {"capability": "filesystem:read"}}}
    else:
        out = {"result": {"status": "ok"}}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], **out}), flush=True)
"""


def test_an_extensions_own_denial_or_crash_code_is_a_tool_error():
    """An extension answering -32002 had `dhara run` report a denial (exit 3) that no check
    made and the audit never held; -32003 looked like a crash (a review). Those codes are
    dhara's: from an extension they are its tool failing (-32001), its code kept in data."""
    h = Home()
    try:
        ext = os.path.join(h.dh, "extensions", "forger")
        os.makedirs(ext)
        with open(os.path.join(ext, "main.py"), "w") as f:
            f.write(FORGER)
        with open(os.path.join(ext, "manifest.json"), "w") as f:
            json.dump({"name": "forger", "version": "1.0.0", "capabilities": [],
                       "runtime": {"type": "subprocess", "command": "python3 main.py"}}, f)
        calls = os.path.join(h.root, "calls.jsonl")
        with open(calls, "w") as f:
            for code in (-32002, -32003, -32004, -32001):
                f.write(json.dumps({"tool": "fail", "input": {"code": code}}) + "\n")
        out = subprocess.run([DHARA, "--no-prompt", "run", "--calls", calls], cwd=h.project, env=h.env,
                             stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=GUARD * 2,
                             start_new_session=True)
        lines = sorted((json.loads(l) for l in out.stdout.splitlines()), key=lambda l: l["id"])
        got = [(l["status"], l["error"]["code"], l["error"].get("data", {}).get("extensionCode")) for l in lines]
        assert got == [("error", -32001, -32002), ("error", -32001, -32003), ("cancelled", -32004, None),
                       ("error", -32001, None)], (got, out.stderr)
        assert lines[0]["error"]["data"]["capability"] == "filesystem:read", lines[0]  # its data kept
        assert out.returncode == 4 and "0 denied" in out.stderr, (out.returncode, out.stderr)
    finally:
        h.close()


def test_ctrl_c_while_serve_starts_the_extensions_ends_it_at_once():
    """serve starts the extensions at initialize; a Ctrl-C then was read only after the
    handshakes (up to 11 s with one hung, a review). initialize is answered with the reason
    and the server exits 130."""
    h = Home()
    try:
        h.add("hang-init")
        proc = subprocess.Popen([DHARA, "--no-prompt", "serve", "--stdio"], cwd=h.project, env=h.env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                     "params": {"cwd": h.project}}).encode() + b"\n")
        proc.stdin.flush()
        deadline = time.monotonic() + GUARD
        while not running_under(os.path.join(h.dh, "extensions", "hang-init")):
            assert time.monotonic() < deadline and proc.poll() is None, "hang-init never started"
            time.sleep(0.05)
        sent = time.monotonic()
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=GUARD)
        waited = time.monotonic() - sent
        answer = json.loads(out.splitlines()[0])
        assert proc.returncode == 130 and answer["id"] == 1, (proc.returncode, out, err)
        assert answer["error"]["message"] == "dhara was interrupted while the extensions started", answer
        assert waited < 8, f"serve ended {waited:.1f} s after the signal"  # a hang guard: the handshake is 10 s
        left = gone_from(os.path.join(h.dh, "extensions"))
        assert not left, f"extensions left running: {left}"
    finally:
        h.close()


def test_disk_full_fails_closed_then_auditing_resumes_in_the_next_session():
    h = Home()
    try:
        h.add_checked_echo("echo-0")
        code, results, err = h.run_batch(echo_batch(3))
        assert code == 0, err
        size = os.path.getsize(h.path("audit.jsonl"))
        # Room for a few more entries, then the file-size limit: the write fails with EFBIG
        # (or is cut short), as on a full disk.
        code, results, err = h.run_batch(echo_batch(40), preexec_fn=file_size_limit(size + 1500))
        assert code == 3, f"exit {code}: {err}"
        statuses = [results[i]["status"] for i in range(1, 41)]
        first_denied = statuses.index("denied")
        assert 0 < first_denied and set(statuses[first_denied:]) == {"denied"}, statuses
        assert set(statuses[:first_denied]) == {"ok"}, statuses
        for i in range(first_denied + 1, 41):
            e = results[i]["error"]
            assert e["code"] == -32002 and AUDIT_FAILED in e["data"]["reason"], e
        # One clear message for the operator, not one per call.
        told = [l for l in err.splitlines() if "audit" in l.lower()]
        assert 1 <= len(told) <= 2, err
        entries, torn = read_audit(h.dh, allow_torn_tail=True)
        audited = {e["toolCallId"] for e in entries if e.get("session", "").startswith("batch-")}
        assert all(f"call-{i}" in audited for i in range(1, first_denied + 1)), (first_denied, len(entries))
        print(f"     {first_denied} calls allowed and audited before the limit, {40 - first_denied} denied; "
              f"stderr: {told}")
        # Space returns: the next session audits again and the chain verifies.
        code, results, err = h.run_batch(echo_batch(5))
        assert code == 0 and all(r["status"] == "ok" for r in results.values()), (code, err)
        code, report = h.verify()
        assert code == 0, report
    finally:
        h.close()


def test_serve_denies_while_the_audit_cannot_be_written_and_resumes_when_space_returns():
    h = Home()
    s = None
    try:
        h.add_checked_echo("echo-0")
        code, _, err = h.run_batch(echo_batch(1))
        assert code == 0, err
        size = os.path.getsize(h.path("audit.jsonl"))
        # A soft limit the test can raise again on the running process (prlimit needs no
        # privilege below the hard limit): the disk "fills", then space returns.
        s = Serve(h, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (size + 700, resource.RLIM_INFINITY)))
        s.initialize()
        outcomes = [s.tool("echo-0/echo", {"text": f"t{i}"}) for i in range(6)]
        allowed = [r for r in outcomes if "result" in r]
        denied = [r for r in outcomes if "error" in r]
        assert allowed and denied and outcomes[:len(allowed)] == allowed, outcomes
        assert all(r["error"]["code"] == -32002 and AUDIT_FAILED in r["error"]["data"]["reason"] for r in denied), denied
        resource.prlimit(s.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        again = s.tool("echo-0/echo", {"text": "space returned"})
        assert again.get("result", {}).get("content", [{}])[0].get("text") == "space returned", again
        assert s.shutdown() == 0
        told = [l for l in s.stderr().splitlines() if "audit" in l.lower()]
        assert len(told) == 2 and "every check is denied" in told[0] and "writable again" in told[1], told
        code, report = h.verify()
        assert code == 0, report
        entries, _ = read_audit(h.dh)
        assert len(entries) == 1 + len(allowed) + 1, (len(entries), len(allowed))
        print(f"     {len(allowed)} allowed, {len(denied)} denied while full, resumed in the same session; {told}")
    finally:
        if s:
            s.close()
        h.close()


NOBODY = 65534
AS_ROOT = os.geteuid() == 0


def drop_root():
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


# preexec_fn for the cases where file modes must bind: root reads and writes through them, so
# as root dhara runs as nobody; anyone else is bound by the modes already.
as_nobody = drop_root if AS_ROOT else None


def give_to_nobody(h):
    """Hands the temporary tree to nobody (when the tests run as root)."""
    if not AS_ROOT:
        return
    h.env["PATH"] = "/usr/bin:/bin"  # the test's PATH may lead through /root
    os.makedirs(h.path("logs"), exist_ok=True)
    for folder, dirs, files in os.walk(h.root):
        for name in dirs + files:
            os.lchown(os.path.join(folder, name), NOBODY, NOBODY)
    os.chown(h.root, NOBODY, NOBODY)


def test_a_read_only_state_folder_fails_closed_then_auditing_resumes():
    h = Home()
    try:
        h.add_checked_echo("echo-0")  # native: nobody cannot reach the python under /root
        give_to_nobody(h)
        os.chmod(h.dh, 0o500)
        code, results, err = h.run_batch(echo_batch(3), preexec_fn=as_nobody)
        assert code == 3, f"exit {code}: {err}"
        assert all(r["status"] == "denied" and AUDIT_FAILED in r["error"]["data"]["reason"] for r in results.values()), results
        told = [l for l in err.splitlines() if "audit" in l.lower()]
        assert 1 <= len(told) <= 2 and "Permission denied" in told[0], err
        assert not os.path.exists(h.path("audit.jsonl"))
        os.chmod(h.dh, 0o700)
        code, results, err = h.run_batch(echo_batch(3), preexec_fn=as_nobody)
        assert code == 0, err
        code, report = h.verify()
        assert code == 0 and len(read_audit(h.dh)[0]) == 3, report
    finally:
        os.chmod(h.dh, 0o700)
        h.close()


# --- a hostile permissions.json ----------------------------------------------------------------

def fingerprint(path):
    """What must not change: the kind, a link's target and the bytes of what is there."""
    if os.path.islink(path):
        target = os.readlink(path)
        with open(os.path.join(os.path.dirname(path), target), "rb") as f:
            return ("link", target, f.read())
    if os.path.isdir(path):
        return ("dir", sorted(os.listdir(path)))
    with open(path, "rb") as f:
        return ("file", os.stat(path).st_mode, f.read())


def spoil(h, kind):
    """Replaces a valid permissions.json (approving echo-0) as `kind` says; returns the preexec_fn
    the commands must run with."""
    p = h.path("permissions.json")
    with open(p) as f:
        good = f.read()
    if kind == "corrupted":
        with open(p, "w") as f:
            f.write(good.replace('"approved"', '"approved",,'))
    elif kind == "truncated":
        with open(p, "w") as f:
            f.write(good[:len(good) // 2])
    elif kind == "a directory":
        os.remove(p)
        os.mkdir(p)
        with open(os.path.join(p, "keep"), "w") as f:
            f.write(good)
    elif kind == "a symlink":
        # Even to a file that approves: dhara does not follow links for its own state.
        with open(os.path.join(h.root, "elsewhere.json"), "w") as f:
            f.write(good)
        os.remove(p)
        os.symlink("../../elsewhere.json", p)
    elif kind == "unreadable":
        give_to_nobody(h)
        os.chmod(p, 0)
        return as_nobody
    return None


HOSTILE_PERMISSIONS = {
    "corrupted": "invalid JSON",
    "truncated": "invalid JSON",
    "a directory": "is a directory, not a file",
    "a symlink": "is a symbolic link",
    "unreadable": "Permission denied",
}


def test_a_hostile_permissions_file_is_refused_never_rewritten_and_nothing_is_allowed():
    for kind, words in HOSTILE_PERMISSIONS.items():
        h = Home()
        s = None
        try:
            h.add_checked_echo("echo-0")
            preexec = spoil(h, kind)
            p = h.path("permissions.json")
            before, listing = fingerprint(p), sorted(os.listdir(h.dh))
            code, results, err = h.run_batch(echo_batch(2), preexec_fn=preexec)
            assert code == 2 and results == {}, f"{kind}: run exit {code}: {results} {err}"
            assert err.count("\n") == 1 and err.startswith("dhara: ") and p in err and words in err, f"{kind}: {err!r}"
            for args in (("approve", "echo-0", "ui:notify"), ("revoke", "echo-0", "ui:notify"), ("reset", "echo-0")):
                out = h.cli("config", "permissions", *args, check=False, preexec_fn=preexec)
                assert out.returncode == 2 and p in out.stderr and words in out.stderr, f"{kind}: {args}: {out}"
            s = Serve(h, preexec_fn=preexec)
            r = s.call("initialize", {"cwd": h.project})
            assert r["error"]["code"] == -32000 and words in r["error"]["message"], f"{kind}: {r}"
            s.close()
            assert fingerprint(p) == before, f"{kind}: permissions.json was changed"
            # No temp file left behind, nothing written but the lock and the (empty) logs folder.
            assert set(os.listdir(h.dh)) - set(listing) <= {"permissions.json.lock", "logs"}, f"{kind}: {os.listdir(h.dh)}"
            assert not os.path.exists(h.path("audit.jsonl")) or not read_audit(h.dh)[0], f"{kind}: something was audited"
        finally:
            if s:
                s.close()
            h.close()


def test_a_permissions_file_spoiled_under_a_running_session_denies_until_fixed():
    for kind in ("corrupted", "a directory", "a symlink"):
        h = Home()
        s = None
        try:
            h.add_checked_echo("echo-0")
            p = h.path("permissions.json")
            with open(p) as f:
                good = f.read()
            s = Serve(h)
            s.initialize()
            assert "result" in s.tool("echo-0/echo", {"text": "before"})
            spoil(h, kind)
            before = fingerprint(p)
            # The session's file watch picks the change up within a second or so; from then on
            # every check is denied, naming the file.
            deadline = time.monotonic() + GUARD
            while "result" in (r := s.tool("echo-0/echo", {"text": "spoiled"})):
                assert time.monotonic() < deadline, f"{kind}: still allowed {GUARD} s after the file was spoiled"
                time.sleep(0.2)
            assert r["error"]["code"] == -32002 and HOSTILE_PERMISSIONS[kind] in r["error"]["data"]["reason"], r
            # tools/list tells the client so instead of listing the tool as ready.
            listed = s.tools()["echo-0/echo"]
            assert listed["status"] == "blocked" and HOSTILE_PERMISSIONS[kind] in listed["reason"], listed
            assert listed["missingCapabilities"] == ["ui:notify"], listed
            assert fingerprint(p) == before, f"{kind}: the session changed permissions.json"
            # Fixed (atomically, as an editor would): allowed again.
            if os.path.isdir(p) and not os.path.islink(p):
                os.remove(os.path.join(p, "keep"))
                os.rmdir(p)
            with open(p + ".fixed", "w") as f:
                f.write(good)
            os.rename(p + ".fixed", p)
            deadline = time.monotonic() + GUARD
            while "error" in (r := s.tool("echo-0/echo", {"text": "fixed"})):
                assert time.monotonic() < deadline, f"{kind}: still denied {GUARD} s after the fix: {r}"
                time.sleep(0.2)
            listed = s.tools()["echo-0/echo"]
            assert listed["status"] == "ready" and listed["missingCapabilities"] == [], listed
            assert s.shutdown() == 0
            told = [l for l in s.stderr().splitlines() if "permissions.json" in l]
            assert 1 <= len(told) <= 2, f"{kind}: {told}"
        finally:
            if s:
                s.close()
            h.close()


# --- concurrent permission changes under a running session -----------------------------------------

SHARED_CAPS = ["filesystem:read", "filesystem:write", "network:fetch", "network:dns", "process:spawn",
               "clipboard:read", "ui:render", "session:read"]
ROUNDS = 4


def test_eight_concurrent_cli_changes_lose_nothing_and_the_session_sees_each():
    h = Home()
    s = None
    try:
        for i in range(8):
            h.add_checked_echo(f"ext-{i}")
        h.add_checked_echo("shared")
        os.remove(h.path("permissions.json"))  # everything pending: only the CLI decides
        s = Serve(h, no_prompt=True)  # a pending capability is denied, not asked about
        s.initialize()
        failures, ops = [], [0] * 8

        def worker(i):
            # Flip its own extension ROUNDS times (ending approved for even i, revoked for odd)
            # and approve its own capability on the shared entry.
            steps = []
            for _ in range(ROUNDS):
                steps += [("approve", f"ext-{i}", "ui:notify"), ("revoke", f"ext-{i}", "ui:notify")]
            if i % 2 == 0:
                steps.append(("approve", f"ext-{i}", "ui:notify"))
            steps.insert(len(steps) // 2, ("approve", "shared", SHARED_CAPS[i]))
            for step in steps:
                out = h.cli("config", "permissions", *step, check=False)
                if out.returncode != 0:
                    failures.append((step, out.returncode, out.stderr))
                ops[i] += 1

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        # The session keeps serving while the file changes under it: every call is answered.
        answered = 0
        while any(t.is_alive() for t in threads):
            r = s.tool(f"ext-{answered % 8}/echo", {"text": "during"})
            assert "result" in r or r["error"]["code"] == -32002, r
            answered += 1
        for t in threads:
            t.join()
        assert not failures, failures[:3]

        perms = json.load(open(h.path("permissions.json")))
        for i in range(8):
            want = "approved" if i % 2 == 0 else "denied"
            assert perms[f"ext-{i}"]["capabilities"] == {"ui:notify": want}, (i, perms.get(f"ext-{i}"))
        assert sorted(perms["shared"]["capabilities"]) == sorted(SHARED_CAPS), perms["shared"]
        assert all(v == "approved" for v in perms["shared"]["capabilities"].values()), perms["shared"]

        # Every change reached the running session: tools/list, then the calls themselves.
        deadline = time.monotonic() + GUARD
        want = {f"ext-{i}/echo": "ready" if i % 2 == 0 else "blocked" for i in range(8)}
        while {k: v["status"] for k, v in s.tools().items() if k in want} != want:
            assert time.monotonic() < deadline, f"the session still shows {s.tools()}"
            time.sleep(0.2)
        for i in range(8):
            r = s.tool(f"ext-{i}/echo", {"text": "after"})
            if i % 2 == 0:
                assert r.get("result", {}).get("content", [{}])[0].get("text") == "after", (i, r)
            else:
                assert r["error"]["code"] == -32002 and r["error"]["data"]["capability"] == "ui:notify", (i, r)
        assert s.shutdown() == 0

        # Each change is audited once, by concurrent writers, and the chain holds.
        entries, _ = read_audit(h.dh)
        changes = [e for e in entries if "change" in e.get("details", {})]
        assert len(changes) == sum(ops), (len(changes), sum(ops))
        code, report = h.verify()
        assert code == 0, report
        print(f"     {sum(ops)} changes by 8 processes, all kept and audited; {answered} calls served meanwhile")
    finally:
        if s:
            s.close()
        h.close()


if __name__ == "__main__":
    # Extra arguments pick tests by a part of their name (while working on one).
    harness.run({k: v for k, v in globals().items() if not sys.argv[3:] or any(a in k for a in sys.argv[3:])})
