#!/usr/bin/env python3
"""`dhara bench` as a smoke test (issue 7): it completes, verifies its audit trail (one entry per
check, the hash chain holds), reports every figure, and leaves the user's home alone. No speed
is asserted: CI machines are noisy.

Usage: bench_test.py DHARA_BINARY SOURCE_ROOT   (env DHARA_BUILD: the build dir; the bench echo
extensions are looked up next to the binary, in extensions/echo-native, echo-py and echo-node,
which the build places there)
Prints `N passed, M failed` last; exits 1 on any failure.
"""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the shared runner beside this file)

DHARA = os.path.abspath(sys.argv[1])
LIMIT = 240  # seconds: only so that a hang fails the test instead of blocking ctest

# A home that must stay untouched: the bench makes its own.
USER_HOME = tempfile.mkdtemp(prefix="dhara-bench-test-home-")
atexit.register(shutil.rmtree, USER_HOME, True)
ENV = {"HOME": USER_HOME, "DHARA_HOME": os.path.join(USER_HOME, ".dhara"),
       "PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def bench(*args):
    p = subprocess.run([DHARA, "bench", *args], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                       start_new_session=True, timeout=LIMIT, env=ENV, cwd=USER_HOME)
    return p.returncode, p.stdout, p.stderr


def check_report(out, calls, warmup=None):
    """The report of a run of `calls` measured calls after `warmup` warm-up calls (default: as
    many as the calls, at most 20000)."""
    r = json.loads(out)
    warmup = min(calls, 20000) if warmup is None else warmup
    for key in ("calls", "calls_per_s", "checks", "checks_per_s", "audit_entries", "audit_lines_per_s",
                "audit_bytes_per_s", "rss_bytes"):
        assert isinstance(r.get(key), (int, float)) and r[key] > 0, f"{key}: {r.get(key)!r}"
    for key in ("p50", "p95", "p99"):
        assert r["latency_us"][key] > 0, f"latency_us.{key}: {r['latency_us']}"
    assert r["latency_us"]["p50"] <= r["latency_us"]["p95"] <= r["latency_us"]["p99"], r["latency_us"]
    for key in ("pipe_round_trip_us_p50", "pipe_calls_per_s", "raw_write_lines_per_s"):
        assert r["baseline"][key] > 0, f"baseline.{key}: {r['baseline']}"
    for key in ("round_trip_p50_vs_pipe", "calls_per_s_vs_pipe", "audit_lines_vs_raw_write"):
        assert r["ratios"][key] > 0, f"ratios.{key}: {r['ratios']}"
    assert r["audit_verified"] is True, r
    assert r["calls"] == calls and r["checks"] == calls and r["audit_entries"] == calls, r
    # The warm-up calls are real calls: each checked and audited, none counted in the figures.
    assert r["warmup_calls"] == warmup and r["warmup_audit_entries"] == warmup, r
    assert r["calls_failed"] == 0 and r["warmup_calls_failed"] == 0, r
    return r


def test_bench_json_completes_and_verifies_its_audit():
    code, out, err = bench("--calls", "2000", "--json")
    assert code == 0, f"exit {code}: {err}{out}"
    r = check_report(out, 2000)
    assert r["durability"] == "write" and r["blocks"] == 1, r


def test_bench_fsync_durability():
    code, out, err = bench("--calls", "2000", "--durability", "fsync", "--extensions", "2", "--inflight", "8", "--json")
    assert code == 0, f"exit {code}: {err}{out}"
    r = check_report(out, 2000)
    assert r["durability"] == "fsync" and r["extensions"] == 2 and r["inflight"] == 8, r


def test_bench_table_says_the_audit_verified():
    code, out, err = bench("--calls", "500", "--extensions", "1", "--inflight", "1")
    assert code == 0, f"exit {code}: {err}{out}"
    for word in ("calls/s", "latency p50", "latency p99", "checks/s", "audit lines/s", "audit bytes/s",
                 "peak RSS", "CPU"):
        assert word in out, f"{word!r} missing from:\n{out}"
    assert "audit: verified: 500 entries for 500 checks, one each, and 500 for the warm-up calls; " \
           "the hash chain holds (1000 lines in all)" in out, out
    assert "(500 warm-up calls first on each side, not measured)" in out, out
    assert "(one call in flight: the latencies depend on whether the kernel keeps each side's two ends\n" \
           "   on one core; run under `taskset -c 0` to compare both sides on one core)" in out, out


def test_bench_warmup_calls_are_audited_but_not_measured():
    code, out, err = bench("--calls", "200", "--warmup", "300", "--extensions", "2", "--json")
    assert code == 0, f"exit {code}: {err}{out}"
    check_report(out, 200, warmup=300)
    code, out, err = bench("--calls", "150", "--warmup", "0", "--extensions", "1", "--json")
    assert code == 0, f"exit {code}: {err}{out}"
    check_report(out, 150, warmup=0)
    code, out, err = bench("--calls", "100", "--warmup", "0", "--extensions", "1")
    assert code == 0, f"exit {code}: {err}{out}"
    assert "warm-up" not in out, out
    assert "one call in flight" not in out, out  # 16 in flight by default
    assert "audit: verified: 100 entries for 100 checks, one each; the hash chain holds (100 lines in all)" in out, out
    code, out, err = bench("--calls", "1", "--warmup", "0", "--extensions", "1")  # counts of one, in words
    assert code == 0, f"exit {code}: {err}{out}"
    assert "dhara bench: 1 native echo extension, 1 call, 16 in flight, durability write\n" in out, out
    assert "audit: verified: 1 entry for 1 check, one each; the hash chain holds (1 line in all)" in out, out


def test_bench_alternates_dhara_and_the_raw_pipes_in_blocks():
    # A block holds at least 1000 calls and 64 rounds of the calls in flight (2000 calls with 16
    # in flight make one block: test_bench_json_completes_and_verifies_its_audit).
    code, out, err = bench("--calls", "2100", "--warmup", "0", "--extensions", "2", "--json")
    assert code == 0, f"exit {code}: {err}{out}"
    r = check_report(out, 2100, warmup=0)
    assert r["blocks"] == 2, r  # 16 in flight: blocks of at least 1024 calls
    code, out, err = bench("--calls", "3000", "--warmup", "0", "--extensions", "1", "--inflight", "1")
    assert code == 0, f"exit {code}: {err}{out}"
    assert "  (the measured calls alternate between dhara and the raw pipes in 3 blocks, so that both\n" \
           "   meet the machine alike: its speed changes within seconds)\n" in out, out
    assert "audit: verified: 3000 entries for 3000 checks, one each; the hash chain holds (3000 lines in all)" in out, out
    # Past 64 extensions the raw pipes run first, alone, and are stopped before dhara starts.
    code, out, err = bench("--calls", "100", "--warmup", "0", "--extensions", "65")
    assert code == 0, f"exit {code}: {err}{out}"
    assert "  (the raw pipes ran before dhara's session opened: more than 64 extensions are not kept\n" \
           "   running twice)\n" in out, out
    assert "alternate" not in out, out
    assert "audit: verified: 100 entries for 100 checks, one each; the hash chain holds (100 lines in all)" in out, out


def test_bench_python_runtime_completes_and_verifies_its_audit():
    code, out, err = bench("--runtime", "python", "--extensions", "2", "--calls", "300", "--inflight", "4", "--json")
    assert code == 0, f"exit {code}: {err}{out}"
    r = check_report(out, 300)
    assert r["runtime"] == "python" and r["extensions"] == 2, r


def test_a_missing_interpreter_is_named_with_what_to_do():
    # A review: "cannot start python3 in <a temporary folder already gone>", exit 1.
    empty = tempfile.mkdtemp(prefix="dhara-nopath-")
    try:
        p = subprocess.run([DHARA, "bench", "--runtime", "python", "--calls", "10"], capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, env={**ENV, "PATH": empty}, timeout=120)
        assert p.returncode == 2, (p.returncode, p.stderr)
        assert p.stderr == ("dhara bench: --runtime python runs its echo with 'python3', which is not on PATH: "
                            "install it, or use --runtime native\n"), p.stderr
    finally:
        os.rmdir(empty)


def test_bench_node_runtime_completes_and_verifies_its_audit():
    code, out, err = bench("--runtime", "node", "--extensions", "2", "--calls", "500", "--inflight", "16", "--json")
    assert code == 0, f"exit {code}: {err}{out}"
    r = check_report(out, 500)
    assert r["runtime"] == "node" and r["extensions"] == 2, r


def test_bench_node_table_names_the_runtime():
    code, out, err = bench("--runtime", "node", "--calls", "100", "--extensions", "1")
    assert code == 0, f"exit {code}: {err}{out}"
    assert "1 node echo extension," in out, out
    assert "audit: verified: 100 entries for 100 checks" in out, out


def test_bench_leaves_the_users_home_alone():
    bench("--calls", "100", "--json")
    assert os.listdir(USER_HOME) == [], os.listdir(USER_HOME)


def test_bad_arguments_exit_2_with_one_sentence():
    for args in (["--calls", "0"], ["--inflight", "0"], ["--extensions", "-1"], ["--durability", "sometimes"],
                 ["--runtime", "ruby"], ["--calls", "many"], ["--warmup", "-1"], ["--warmup", "-2"], ["--warmup", "some"]):
        code, out, err = bench(*args)
        assert code == 2, f"{args}: exit {code}: {err}{out}"
        assert err.strip() and out == "", f"{args}: {err!r} {out!r}"


if __name__ == "__main__":
    harness.run(dict(globals()))
