#!/usr/bin/env python3
"""How dhara answers a command line it cannot take: one line on stderr naming the command it
is in and what is wrong, where to read more, exit 2, and nothing written.

Usage: usage_test.py DHARA_BINARY SOURCE_ROOT   (registered by tests/CMakeLists.txt)
Prints `N passed, M failed` last; exits 1 on any failure.
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the shared runner beside this file)

DHARA = os.path.abspath(sys.argv[1])


def dhara(*args):
    """Runs dhara in an empty temporary HOME; returns (exit code, stdout, stderr, what the
    run left in HOME)."""
    root = tempfile.mkdtemp(prefix="dhara-usage-")
    try:
        env = {"HOME": root, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        p = subprocess.run([DHARA, *args], cwd=root, env=env, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=60)
        return p.returncode, p.stdout, p.stderr, sorted(os.listdir(root))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_usage_errors_are_one_line_naming_the_command():
    cases = [
        (["run"], "dhara run: --calls is required; see 'dhara run --help'\n"),
        (["serve"], "dhara serve: --stdio is required; see 'dhara serve --help'\n"),
        (["config"], "dhara config: A subcommand is required; see 'dhara config --help'\n"),
        (["bench", "--calls", "abc"], "dhara bench: Could not convert: --calls = abc; see 'dhara bench --help'\n"),
        (["doctor", "--audit-log", "-n", "x"],
         "dhara doctor: -n: Value x not in range 0 to 100000000; see 'dhara doctor --help'\n"),
    ]
    for args, expected in cases:
        code, out, err, left = dhara(*args)
        assert (code, out, err) == (2, "", expected), (args, code, out, err)
        assert left == [], (args, left)
    code, out, err, left = dhara("config", "permissions", "approve", "x", "y", "z", "w")
    assert code == 2 and out == "" and err.startswith("dhara config permissions approve: ") and \
        err.endswith("; see 'dhara config permissions approve --help'\n") and err.count("\n") == 1, err
    assert left == [], left


def test_unknown_commands_and_options_are_named():
    code, out, err, left = dhara("frob")
    assert (code, out, err) == (2, "", "dhara: 'frob' is not a dhara command; see 'dhara --help'\n"), (code, out, err)
    for args in (["--bogus"], ["--calls", "x", "run"], ["-v", "--frob=1", "doctor"]):
        code, out, err, left = dhara(*args)
        word = args[-2] if args[0] == "-v" else args[0]
        assert code == 2 and out == "" and err.count("\n") == 1 and \
            err.startswith(f"dhara: '{word}' is not an option of dhara itself") and \
            "a command's options follow it" in err, (args, code, err)
        assert left == [], (args, left)


def test_global_flags_before_a_command_still_work():
    code, out, err, _ = dhara("--no-prompt", "-v", "--version")
    assert (code, out, err) == (0, "dhara 0.1.0\n", ""), (code, out, err)
    code, out, err, _ = dhara("--help")
    assert code == 0 and "Subcommands:" in out and "doctor" in out and err == "", (code, out, err)
    code, out, err, _ = dhara("--no-prompt", "doctor", "--audit-log", "-n", "1")
    assert code == 0 and out == "No audit entries.\n", (code, out, err)


if __name__ == "__main__":
    harness.run(globals())
