#!/usr/bin/env python3
"""The micro bench binaries users run by hand (bench/): their arguments. --help is usage on
stdout and exit 0; a bad argument is one sentence and the usage, exit 2, with nothing created.
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


if __name__ == "__main__":
    harness.run(dict(globals()))
