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
        (["config"], "dhara config: give one of its commands: get, set, unset, permissions; "
                     "see 'dhara config --help'\n"),
        (["config", "permissions", "approve", "web-tools"],
         "dhara config permissions approve: give a capability (e.g. network:fetch) or --all; "
         "see 'dhara config permissions approve --help'\n"),
        (["config", "set", "security.level"],
         "dhara config set: give a VALUE (or --add/--remove ENTRY for a list key); see 'dhara config set --help'\n"),
        (["bench", "--calls", "abc"],
         "dhara bench: --calls takes a whole number from 1 to 100000000, not 'abc'; see 'dhara bench --help'\n"),
        (["run", "--calls", "c.jsonl", "-j", "1.5"],
         "dhara run: --concurrency takes a whole number from 1 to 1024, not '1.5'; see 'dhara run --help'\n"),
        (["bench", "--calls"], "dhara bench: --calls needs a whole number after it; see 'dhara bench --help'\n"),
        (["run", "--calls"], "dhara run: --calls needs a value after it; see 'dhara run --help'\n"),
        (["doctor", "--audit-log", "-n", "x"],
         "dhara doctor: -n takes a whole number from 0 to 100000000, not 'x'; see 'dhara doctor --help'\n"),
        (["run", "--calls", "c.jsonl", "-j", "0"],
         "dhara run: --concurrency takes a whole number from 1 to 1024, not '0'; see 'dhara run --help'\n"),
        (["run", "--calls", "c.jsonl", "--mode", "sometimes"],
         "dhara run: --mode takes one of auto, approve, review, not 'sometimes'; see 'dhara run --help'\n"),
        (["bench", "--extensions", "5000"],
         "dhara bench: --extensions takes a whole number from 1 to 1000, not '5000'; see 'dhara bench --help'\n"),
        (["bench", "--runtime", "ruby"],
         "dhara bench: --runtime takes one of native, python, node, not 'ruby'; see 'dhara bench --help'\n"),
        (["bench", "--json=maybe"], "dhara bench: --json is a flag: give it without a value; see 'dhara bench --help'\n"),
        # dhara's own flag: said by dhara, whose help lists it (not doctor's, which does not).
        (["--no-prompt=x", "doctor"], "dhara: --no-prompt is a flag: give it without a value; see 'dhara --help'\n"),
        (["--verbose=maybe", "config", "get", "security.level"],
         "dhara: --verbose is a flag: give it without a value; see 'dhara --help'\n"),
        # A boolean word is a value all the same: "--no-prompt=false" prompted, "--json=0" printed
        # text, in silence (a review).
        (["--no-prompt=false", "doctor"], "dhara: --no-prompt is a flag: give it without a value; see 'dhara --help'\n"),
        (["--verbose=1", "doctor"], "dhara: --verbose is a flag: give it without a value; see 'dhara --help'\n"),
        (["config", "get", "security.level", "--json=0"],
         "dhara config get: --json is a flag: give it without a value; see 'dhara config get --help'\n"),
        (["doctor", "--audit-log", "--denied-only=no"],
         "dhara doctor: --denied-only is a flag: give it without a value; see 'dhara doctor --help'\n"),
        # "sandbox exec": a missing --extension is said as such (it said "'--' is not an option …
        # did you mean '-h'?"), and a program's own option says where it goes (a review).
        (["sandbox", "exec", "--", "ls"], "dhara sandbox exec: --extension is required; see 'dhara sandbox exec --help'\n"),
        (["sandbox", "exec", "--extension", "std", "ls", "-la"],
         "dhara sandbox exec: '-la' is not an option of this command; to give it to the program, put '--' before the "
         "program, as in 'dhara sandbox exec --extension NAME -- PROGRAM -la'; see 'dhara sandbox exec --help'\n"),
        # "-v=1" read by CLI11 is "-v" and a stray "-=1": said as the flag with a value.
        (["-v=1", "doctor"], "dhara: -v is a flag: give it without a value; see 'dhara --help'\n"),
        # "-j=3" gives -j the value "=3": the value is named as given, and the way to write it.
        (["run", "--calls", "c.jsonl", "-j=3"],
         "dhara run: --concurrency takes a whole number from 1 to 1024, not '=3' (a short option takes its value "
         "after a space, as in '-j 3'); see 'dhara run --help'\n"),
        (["run", "--calls", "c.jsonl", "-j=x"],  # '-j x' would be refused too: no way to write it offered
         "dhara run: --concurrency takes a whole number from 1 to 1024, not '=x'; see 'dhara run --help'\n"),
        (["doctor", "--audit-log", "-n=5"],
         "dhara doctor: -n takes a whole number from 0 to 100000000, not '=5' (a short option takes its value "
         "after a space, as in '-n 5'); see 'dhara doctor --help'\n"),
        (["serve", "--stdio", "--mode=x"],
         "dhara serve: --mode takes one of auto, approve, review, not 'x'; see 'dhara serve --help'\n"),
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
    code, out, err, left = dhara("docter")
    assert (code, out, err) == (2, "", "dhara: 'docter' is not a dhara command (did you mean 'doctor'?); "
                                "see 'dhara --help'\n"), (code, out, err)
    code, out, err, left = dhara()
    assert (code, out, err) == (2, "", "dhara: give one of its commands: demo, extensions, run, serve, config, "
                                "doctor, sandbox, bench; see 'dhara --help'\n"), (code, out, err)
    for args in (["--bogus"], ["--calls", "x", "run"], ["-v", "--frob=1", "doctor"]):
        code, out, err, left = dhara(*args)
        word = args[-2] if args[0] == "-v" else args[0]
        assert code == 2 and out == "" and err.count("\n") == 1 and \
            err.startswith(f"dhara: '{word}' is not an option of dhara itself") and \
            "a command's options follow it" in err, (args, code, err)
        assert left == [], (args, left)


def test_a_word_the_command_does_not_take_is_named_first():
    # CLI11 reports a missing required option before a word no option took, and lists such
    # words backwards: 'dhara run --call x' said '--calls is required'. The first word on the
    # line that the command does not take is what to fix; it is named, with the nearest name.
    cases = [
        (["run", "--call", "calls.jsonl"],
         "dhara run: '--call' is not an option of this command (did you mean '--calls'?); see 'dhara run --help'\n"),
        (["run", "--foo"], "dhara run: '--foo' is not an option of this command; see 'dhara run --help'\n"),
        (["run", "--calls", "c.jsonl", "extra", "word"],
         "dhara run: 'extra' is more than this command takes; see 'dhara run --help'\n"),
        (["doctor", "--audit-logs"],
         "dhara doctor: '--audit-logs' is not an option of this command (did you mean '--audit-log'?); "
         "see 'dhara doctor --help'\n"),
        (["config", "permisions", "list"],
         "dhara config: 'permisions' is not one of its commands (did you mean 'permissions'?); "
         "see 'dhara config --help'\n"),
        (["config", "permissions", "approve", "x", "y", "z"],
         "dhara config permissions approve: 'z' is more than this command takes; "
         "see 'dhara config permissions approve --help'\n"),
        (["sandbox", "exec", "--bogus", "--", "true"],
         "dhara sandbox exec: '--bogus' is not an option of this command; see 'dhara sandbox exec --help'\n"),
        # dhara's own flags go before the command (docs/cli.md): the line to type is shown.
        (["run", "--calls", "c.jsonl", "--no-prompt"],
         "dhara run: '--no-prompt' is a flag of dhara itself: give it before the command, as in "
         "'dhara --no-prompt run …'; see 'dhara run --help'\n"),
        (["config", "permissions", "list", "-v"],
         "dhara config permissions list: '-v' is a flag of dhara itself: give it before the command, as in "
         "'dhara -v config permissions list …'; see 'dhara config permissions list --help'\n"),
        (["doctor", "-vv"],  # dhara's -v twice, as CLI11 reads a cluster of short flags
         "dhara doctor: '-vv' is a flag of dhara itself: give it before the command, as in "
         "'dhara -vv doctor …'; see 'dhara doctor --help'\n"),
        (["config", "--version"],  # it ends dhara at once: nothing goes after it
         "dhara config: '--version' is a flag of dhara itself: run 'dhara --version'; see 'dhara config --help'\n"),
        (["run", "--no-prompt"],  # before the missing --calls, too
         "dhara run: '--no-prompt' is a flag of dhara itself: give it before the command, as in "
         "'dhara --no-prompt run …'; see 'dhara run --help'\n"),
        # A mistyped flag of dhara's after the command: the nearest of dhara's own, and where it goes.
        (["doctor", "--no-promptt"],
         "dhara doctor: '--no-promptt' is not an option of this command (did you mean '--no-prompt', a flag of "
         "dhara itself? it goes before the command, as in 'dhara --no-prompt doctor …'); see 'dhara doctor --help'\n"),
        (["config", "permissions", "list", "--verbos"],
         "dhara config permissions list: '--verbos' is not an option of this command (did you mean '--verbose', "
         "a flag of dhara itself? it goes before the command, as in 'dhara --verbose config permissions list …'); "
         "see 'dhara config permissions list --help'\n"),
        (["run", "--calls", "c.jsonl", "--versio"],  # --version ends dhara: never offered after a command
         "dhara run: '--versio' is not an option of this command; see 'dhara run --help'\n"),
        (["run", "--calls", "c.jsonl", "--mod\x1b"],  # a control byte is not sent to the terminal
         "dhara run: '--mod?' is not an option of this command (did you mean '--mode'?); "
         "see 'dhara run --help'\n"),
    ]
    for args, expected in cases:
        code, out, err, left = dhara(*args)
        assert (code, out, err) == (2, "", expected), (args, code, out, err)
        assert left == [], (args, left)


def test_global_flags_before_a_command_still_work():
    code, out, err, _ = dhara("--no-prompt", "-v", "--version")
    assert (code, out, err) == (0, "dhara 0.1.0\n", ""), (code, out, err)
    code, out, err, _ = dhara("--help")
    assert code == 0 and "Subcommands:" in out and "doctor" in out and err == "", (code, out, err)
    code, out, err, _ = dhara("--no-prompt", "doctor", "--audit-log", "-n", "1")
    assert code == 0 and out == "No audit entries.\n", (code, out, err)
    code, out, err, _ = dhara("-vv", "doctor", "--audit-log", "-n", "1")  # -v twice, as CLI11 reads it
    assert code == 0 and out == "No audit entries.\n", (code, out, err)


if __name__ == "__main__":
    harness.run(globals())
