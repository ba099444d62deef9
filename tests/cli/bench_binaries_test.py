#!/usr/bin/env python3
"""The micro bench binaries users run by hand (bench/): their arguments (--help is usage on
stdout and exit 0; a bad argument is one sentence and the usage, exit 2, with nothing created),
and short runs that read their tables (no speed asserted).
Apart from bench_test.py because that one runs under ThreadSanitizer too, whose build makes
only the binaries its tests need.

Usage: bench_binaries_test.py DHARA_BINARY SOURCE_ROOT   (env DHARA_BUILD: the build dir, whose
bench/ holds the binaries)
Prints `N passed, M failed` last; exits 1 on any failure.
"""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the shared runner beside this file)

DHARA = os.path.abspath(sys.argv[1])
LIMIT = 60  # seconds: only so that a hang fails the test instead of blocking ctest
RUN_LIMIT = 300  # the same for a whole bench run (minutes under AddressSanitizer on a busy machine)

# Where the binaries run: must stay empty (a mistyped flag is not a folder to create).
USER_HOME = tempfile.mkdtemp(prefix="dhara-bench-binaries-test-")
atexit.register(shutil.rmtree, USER_HOME, True)


def bench_binary(name):
    path = os.path.join(os.environ.get("DHARA_BUILD", os.path.dirname(DHARA)), "bench", name)
    assert os.access(path, os.X_OK), f"{path} is not built: the default build makes every bench binary"
    return path


def test_bench_binaries_answer_bad_arguments_with_a_sentence():
    runtime = bench_binary("dhara_bench_runtime")
    p = subprocess.run([runtime, "--help"], capture_output=True, text=True, timeout=LIMIT, cwd=USER_HOME)
    assert p.returncode == 0 and p.stdout.startswith("usage: dhara_bench_runtime [round_trips]"), p
    for args, why in ((["12x"], "'12x' is not a number of round trips"), (["5"], "'5' is not a number"),
                      (["99999999999999999999999"], "is not a number"), (["100", "2"], "at most one argument")):
        p = subprocess.run([runtime, *args], capture_output=True, text=True, timeout=LIMIT, cwd=USER_HOME)
        assert p.returncode == 2 and why in p.stderr and p.stdout == "", f"{args}: {p}"

    audit = bench_binary("dhara_bench_audit")
    p = subprocess.run([audit, "--benchmark_filter=none", "--bogus"], capture_output=True, text=True,
                       timeout=LIMIT, cwd=USER_HOME)
    assert p.returncode == 2 and "'--bogus' is neither a --benchmark_... flag nor a folder name" in p.stderr, p
    assert os.listdir(USER_HOME) == [], os.listdir(USER_HOME)
    blocker = os.path.join(USER_HOME, "a-file")
    open(blocker, "w").close()
    p = subprocess.run([audit, "--benchmark_filter=none", os.path.join(blocker, "sub")], capture_output=True,
                       text=True, timeout=LIMIT, cwd=USER_HOME)
    os.unlink(blocker)
    assert p.returncode == 1 and "cannot create the folder" in p.stderr, p


def test_bench_runtime_measures_both_sides_in_blocks():
    """A short run of the whole-runtime bench: it ends with every row filled, its round trips
    and calls in flight measured in blocks that alternate with the raw pipe's, and each fleet
    measured against its bare start (no speed asserted)."""
    runtime = bench_binary("dhara_bench_runtime")
    p = subprocess.run([runtime, "100"], capture_output=True, text=True, timeout=RUN_LIMIT, cwd=USER_HOME)
    assert p.returncode == 0, p
    out = p.stdout
    assert "alternate between the raw pipe and dhara in 10 blocks of each kind" in out, out
    rows = {line.split("  ")[0]: line for line in out.splitlines()}
    assert float(rows["round trip, native echo"].split("p50")[1].split()[0]) > 0, out
    dhara_row = next(line for line in out.splitlines() if "p50 ratio" in line)
    assert float(dhara_row.split("p50 ratio")[1].split("x")[0]) > 0, out
    raw, dhara = rows["16 in flight, calls/s"].split("raw")[1].split("dhara")
    assert float(raw) > 0 and float(dhara.split("(")[0]) > 0, out
    for fleet in ("start 50 node extensions", "start 100 native"):
        assert "started bare" in rows[fleet] and "not measured" not in rows[fleet], out
    assert "dhara, bare, bare, dhara" in out, out
    assert float(rows["dhara max RSS, 100 ext."].split("ext.")[1].split("MiB")[0]) > 1, out


def test_bench_runtime_fails_when_a_row_is_not_measured():
    """Without node on PATH the node fleet cannot start: the table says why in that row, and the
    bench ends with a sentence and exit 1 instead of passing a table with a hole for a whole one."""
    runtime = bench_binary("dhara_bench_runtime")
    no_node = tempfile.mkdtemp(prefix="dhara-no-node-")
    try:
        env = dict(os.environ, PATH=no_node)
        p = subprocess.run([runtime, "100"], capture_output=True, text=True, timeout=RUN_LIMIT, cwd=USER_HOME, env=env)
    finally:
        os.rmdir(no_node)
    assert p.returncode == 1, p
    rows = {line.split("  ")[0]: line for line in p.stdout.splitlines()}
    assert "not measured (50 of them did not start; echo-node-0: cannot start: 'node' is not on PATH)" in \
        rows["start 50 node extensions"], p.stdout
    assert "started bare" in rows["start 100 native"], p.stdout
    assert p.stderr.strip() == "dhara_bench_runtime: some rows were not measured; the table says why.", p.stderr


def items_per_second(row):
    """The items/s at the end of a Google Benchmark console row ("1.11509M/s", "835.417k/s")."""
    figure = row.split()[-1]
    assert figure.endswith("/s"), row
    scale = {"k": 1e3, "M": 1e6, "G": 1e9}.get(figure[-3], 1)
    return float(figure[:-3] if figure[-3] in "kMG" else figure[:-2]) * scale


def test_suites_summarize_repeated_runs_by_their_median():
    """Repeated with their repetitions shuffled (as docs/performance.md suggests against the
    machine's phases), a suite's summary of ratios uses each case's median, not the
    repetition that happened to come last."""
    checker = bench_binary("dhara_bench_checker")
    p = subprocess.run([checker, "--benchmark_filter=AuditedChecks/3/|RawWrite/0/", "--benchmark_repetitions=5",
                        "--benchmark_enable_random_interleaving=true"],
                       capture_output=True, text=True, timeout=RUN_LIMIT, cwd=USER_HOME)
    assert p.returncode == 0, p
    assert "\033[" not in p.stdout, "no colour codes when the output is not a terminal"
    rows = p.stdout.splitlines()
    for case, summary in (("BM_Checker_AuditedChecks/3/", "write, URL checks"),
                          ("BM_Baseline_RawWrite/0/", "raw batched write")):
        runs = [items_per_second(r) for r in rows if r.startswith(case) and r.split()[0].endswith("real_time")]
        medians = [items_per_second(r) for r in rows if r.startswith(case) and r.split()[0].endswith("_median")]
        assert len(runs) == 5 and len(medians) == 1, p.stdout
        assert medians[0] == sorted(runs)[2], (runs, medians)
        line = next(r for r in rows if r.startswith(summary))
        assert abs(float(line[len(summary):].split()[0]) - medians[0] / 1e6) < 0.006, (line, medians, runs)


if __name__ == "__main__":
    harness.run(dict(globals()))
