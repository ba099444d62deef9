#!/usr/bin/env python3
"""Load (issue 8): 200 native echo extensions under `dhara serve --stdio` with `fsync` audit
durability, calls flowing without pause while an approval/request stays unanswered, then
answered. Nothing may be lost (every call answered once, with its own text; one audit entry per
check; the chain verifies) and memory must stay flat (dhara's RSS sampled: the second half of
the run may not grow far past the first).

The load lasts DHARA_LOAD_SECONDS seconds (default 25, for CI; DHARA_LOAD_SECONDS=60 is the
full minute of the issue). Throughput is printed, never asserted: time limits are hang guards.
In a sanitizer build (ASan/TSan) the memory figures are printed but not asserted.
Usage: load_test.py DHARA_BINARY SOURCE_ROOT   (registered by tests/CMakeLists.txt)
Prints `N passed, M failed` last; exits 1 on any failure.
"""
import json
import os
import select
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the shared runner beside this file)
from fault_support import GUARD, SANITIZED, Home, Serve, gone_from, kib, read_audit, zombies_of  # noqa: E402

# 200 in the release build, as issue 8 asks (they start in 0.7-0.8 s here). A sanitizer
# build's 200 processes took 5-6.7 s to start alone, and in two of three ASan stages of CI
# (2026-12-07), beside the other tests, only 59 and 31 were ready within the session's
# handshake window (10 s + 1 s), the rest failed for the session (each passed on its retry).
# There the load runs on 100: what it checks (memory errors under load) does not need 200.
EXTENSIONS = 100 if SANITIZED else 200
INFLIGHT = 64
SECONDS = float(os.environ.get("DHARA_LOAD_SECONDS", "25"))
GROWTH = 1.5            # the second half's peak RSS may be at most this times the first half's …
SLACK_KIB = 16 * 1024   # … plus this (allocator noise on a small process)


def test_200_extensions_under_fsync_with_an_approval_pending_lose_nothing_and_stay_flat():
    h = Home(prefix="dhara-load-")
    s = None
    try:
        for i in range(EXTENSIONS):
            h.add_checked_echo(f"echo-{i:03}")
        h.add("fs-tool")  # filesystem:read pending: its call asks the client
        h.config({"security": {"audit": {"durability": "fsync"}}})
        s = Serve(h)
        s.initialize(limit=120)
        tools = s.tools()
        ready = [k for k, t in tools.items() if k.startswith("echo-") and t["status"] == "ready"]
        # The session waits one handshake's time (10 s + 1 s) for all of them; one not ready by
        # then is failed for the session and has no tools to list.
        assert len(ready) == EXTENSIONS, f"{len(ready)} echo extensions ready"

        # The question is asked and left open for the whole run.
        read_call = s.request("tools/call", {"tool": "fs-tool/read", "input": {"path": "a.txt"}})
        question = s.read()
        assert question.get("method") == "approval/request" and question["params"]["capability"] == "filesystem:read", question

        expected = {}  # request id → the text its echo must return
        answered, samples, buffer = 0, [], b""
        started = time.monotonic()
        next_sample = started
        last_answer = started
        fd = s.proc.stdout.fileno()
        while True:
            now = time.monotonic()
            sending = now - started < SECONDS
            if not sending and not expected:
                break
            if sending and len(expected) < INFLIGHT:
                lines = []
                while len(expected) < INFLIGHT:
                    s.next_id += 1
                    text = f"load {s.next_id}"
                    expected[s.next_id] = text
                    lines.append(json.dumps({"jsonrpc": "2.0", "id": s.next_id, "method": "tools/call", "params": {
                        "tool": f"echo-{s.next_id % EXTENSIONS:03}/echo", "input": {"text": text}}}))
                s.proc.stdin.write(("\n".join(lines) + "\n").encode())
                s.proc.stdin.flush()
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                chunk = os.read(fd, 1 << 20)
                assert chunk, f"dhara closed its output; stderr: {s.stderr()[-2000:]}"
                buffer += chunk
                *complete, buffer = buffer.split(b"\n")
                for line in complete:
                    m = json.loads(line)
                    want = expected.pop(m.get("id"), None)
                    assert want is not None, f"an answer to nothing asked, or twice: {m}"
                    got = m.get("result", {}).get("content", [{}])[0].get("text")
                    assert got == want, f"call {m['id']}: {m}"
                    answered += 1
                last_answer = time.monotonic()
            assert time.monotonic() - last_answer < GUARD, f"no answer for {GUARD} s, {len(expected)} in flight"
            if now >= next_sample:
                samples.append((now - started, kib(s.pid, "VmRSS")))
                next_sample = now + 0.5
        elapsed = time.monotonic() - started

        # Calls flowed the whole time the question was open; now it is answered.
        s.answer = {"jsonrpc": "2.0", "id": question["id"], "result": {"decision": "allow"}}
        s.send(s.answer)
        r = s.wait_for(read_call)
        # Allowed to dhara's check; fs-tool's own open is its OS sandbox's, which holds only
        # approved capabilities (docs/sandbox.md), so without Landlock it reads the file.
        text = r["result"]["content"][0]["text"]
        assert text == "alpha\nbeta\n" or "Permission denied" in text, r
        assert not zombies_of(s.pid), zombies_of(s.pid)
        hwm = kib(s.pid, "VmHWM")
        assert s.shutdown(limit=60) == 0
        left = gone_from(h.root, limit=30)
        assert not left, f"{len(left)} processes left after shutdown"

        # Memory: flat, not growing with the number of calls.
        half = len(samples) // 2
        first = max(r for _, r in samples[:half])
        second = max(r for _, r in samples[half:])
        # (In a sanitizer build the quarantine fills as the run goes: reported, not asserted.)
        assert SANITIZED or second <= first * GROWTH + SLACK_KIB, f"RSS grew: first half peak {first} KiB, second {second} KiB"

        # Nothing lost: one entry per check (each echo needs ui:notify; the read asked once and
        # was checked once), in an unbroken chain.
        entries, _ = read_audit(h.dh)
        echoes = [e for e in entries if e.get("tool") == "echo"]
        assert len(echoes) == answered, (len(echoes), answered)
        assert all(e["action"] == "allowed" and e["capability"] == "ui:notify" for e in echoes)
        reads = [e for e in entries if e.get("tool") == "read"]
        assert [(e["action"], e["decidedBy"]) for e in reads] == [("allowed", "user")], reads
        refused = [e for e in entries if e.get("tool") == "overreach"]  # fs-tool's tool refused at load
        assert len(refused) == 1 and len(entries) == answered + 1 + 1, (len(entries), answered)
        code, report = h.verify()
        assert code == 0, report
        print(f"     {EXTENSIONS} extensions, {answered} calls in {elapsed:.1f} s ({answered / elapsed:.0f}/s) under fsync, "
              f"approval open throughout; audit entries {len(entries)} = checks; RSS peak first half {first // 1024} MiB, "
              f"second half {second // 1024} MiB, VmHWM {hwm // 1024} MiB")
    finally:
        if s:
            s.close()
        h.close()


if __name__ == "__main__":
    harness.run(dict(globals()))
