#!/usr/bin/env python3
"""The bash completion script (scripts/completion/dhara.bash), run in a real non-interactive
bash: the script is sourced, COMP_WORDS/COMP_CWORD/COMP_LINE/COMP_POINT/COMP_WORDBREAKS are set
as bash 5.2 sets them (words split at whitespace and at every COMP_WORDBREAKS character, so
`network:fetch` is three words and `@scope/x` two), `_dhara` is called and COMPREPLY is read
back; a reply replaces readline's word, the text after the last break character.

Then the consistency checks that keep the static script from falling behind the binary: every
subcommand and flag that `dhara ... --help` lists at every level, every key of
`dhara config get --help` and every capability of policy/capability.cpp is offered, and
nothing else.

Usage: completion_test.py DHARA_BINARY SOURCE_ROOT
Prints `N passed, M failed` last; exits 1 on any failure.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the shared runner beside this file)

DHARA, ROOT = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
SCRIPT = os.path.join(ROOT, "scripts", "completion", "dhara.bash")
SCRATCH = tempfile.mkdtemp(prefix="dhara-completion-")

# bash 5.2's default COMP_WORDBREAKS, whitespace aside.
BREAKS = "\"'@><=;|&(:"

# Reads the arguments, sets the completion variables as bash would, and prints COMPREPLY.
DRIVER = r'''
source "$1" || exit 90
complete -p dhara >/dev/null || exit 91
COMP_WORDBREAKS=$' \t\n'$4
COMP_LINE=$2 COMP_POINT=${#2} COMP_CWORD=$3
shift 4
COMP_WORDS=("$@")
_dhara || exit 92
for r in "${COMPREPLY[@]}"; do printf '%s\n' "$r"; done
'''


def bash_words(line, breaks=BREAKS):
    """COMP_WORDS as bash builds them: whitespace separates words, and each run of
    COMP_WORDBREAKS characters is a word of its own; a trailing space starts an empty word."""
    words = []
    for token in line.split():
        if breaks:
            words += [p for p in re.split("([" + re.escape(breaks) + "]+)", token) if p]
        else:
            words.append(token)
    if not line or line[-1].isspace():
        words.append("")
    return words


def complete(line, env=None, breaks=BREAKS, cwd=None):
    """The completions `_dhara` offers with the cursor at the end of `line`."""
    words = bash_words(line, breaks)
    e = {"PATH": os.environ["PATH"], "HOME": os.path.join(SCRATCH, "nohome")}
    e.update(env or {})
    p = subprocess.run(["bash", "--norc", "--noprofile", "-c", DRIVER, "driver", SCRIPT, line,
                        str(len(words) - 1), breaks, *words],
                       env=e, cwd=cwd or SCRATCH, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and p.stderr == "", (line, p.returncode, p.stderr)
    return [r for r in p.stdout.split("\n") if r]


def check(expected, line, env=None, breaks=BREAKS, cwd=None, any_order=False):
    """Asserts what `_dhara` offers for `line`, naming the line when it does not."""
    got = complete(line, env, breaks, cwd)
    if any_order:
        got, expected = sorted(got), sorted(expected)
    assert got == expected, f"{line!r}: offered {got}, expected {expected}"


def applied(line, reply, breaks=BREAKS):
    """The line after readline puts `reply` in place of its word: the text after the last
    whitespace or break character."""
    start = len(line)
    while start > 0 and not line[start - 1].isspace() and line[start - 1] not in breaks:
        start -= 1
    return line[:start] + reply


def dhara_help(*path):
    p = subprocess.run([DHARA, *path, "--help"], capture_output=True, text=True, timeout=30,
                       env={"PATH": os.environ["PATH"], "HOME": SCRATCH,
                            "DHARA_HOME": os.path.join(SCRATCH, "help-home")})
    assert p.returncode == 0, (path, p.returncode, p.stderr)
    return p.stdout


def section(text, title):
    """The two-space-indented lines under a `Title:` header line of --help output."""
    lines, inside = [], False
    for line in text.split("\n"):
        if line == title + ":":
            inside = True
        elif inside and line.startswith("  "):
            lines.append(line)
        elif inside:
            break
    return lines


def help_subcommands(text):
    return [l.split()[0] for l in section(text, "Subcommands")]


def help_flags(text):
    flags = []
    for line in section(text, "Options"):
        if line.startswith("  -"):
            flags += line.split()[0].split(",")
    return flags


def command_tree():
    """Every command path the binary has, from the top ([]) down, with its --help text."""
    tree, todo = {}, [()]
    while todo:
        path = todo.pop(0)
        tree[path] = dhara_help(*path)
        todo += [path + (s,) for s in help_subcommands(tree[path])]
    return tree


def extension_home():
    """A DHARA_HOME with installed folders, a scoped one, an install in progress and a file."""
    home = tempfile.mkdtemp(prefix="home-", dir=SCRATCH)
    ext = os.path.join(home, ".dhara", "extensions")
    for name in ("web-tools", "notes", "fs-tool", "@zosmaai/web-tools", ".install-x1y2", "@empty"):
        os.makedirs(os.path.join(ext, name))
    open(os.path.join(ext, "README.md"), "w").close()
    return home, os.path.join(home, ".dhara")


EXTENSIONS = ["@zosmaai/web-tools", "fs-tool", "notes", "web-tools"]


# ---- positions ---------------------------------------------------------------------------

def test_top_level_offers_the_commands_and_global_flags():
    check(["bench", "config", "demo", "doctor", "extensions", "run", "sandbox", "serve"], "dhara ", any_order=True)
    check(["config"], "dhara co")
    check(["demo", "doctor"], "dhara d")
    check(["--help", "--version", "--verbose", "--no-prompt"], "dhara --")
    check(["extensions"], "dhara --no-prompt -v ex")  # global flags before the command


def test_nested_subcommands():
    check(["approve"], "dhara config permissions ap")
    check(["revoke", "reset"], "dhara config permissions re")
    check(["get", "set", "unset", "permissions"], "dhara config ")
    check(["list", "install", "remove"], "dhara extensions ")
    check(["-h", "--help", "--json"], "dhara config permissions list ")


def test_mode_values_in_both_spellings():
    check(["auto", "approve", "review"], "dhara run --mode ")
    check(["approve"], "dhara run --calls calls.jsonl --mode ap")
    check(["review"], "dhara serve --stdio --mode r")
    line = "dhara run --mode=ap"  # COMP_WORDS: --mode, =, ap
    check(["approve"], line)
    assert applied(line, "approve") == "dhara run --mode=approve"
    check(["auto", "approve", "review"], "dhara run --mode=")  # COMP_WORDS ends with "="


def test_flags_per_subcommand():
    check(["--calls", "--concurrency"], "dhara run --c")
    check(["--denied-only"], "dhara doctor --audit-log --d")
    check(["--help", "--force", "--upgrade", "--json"], "dhara extensions install --")
    check(["--help", "--all"], "dhara config permissions approve web-tools --")
    check(["--project"], "dhara config set security.level paranoid --p")


def test_setting_keys_and_values():
    check(["security.level"], "dhara config set security.le")
    check(["security.audit.durability", "security.audit.maxBytes", "security.audit.keep"],
          "dhara config get security.audit.")
    assert "security.audit" in complete("dhara config get security.a")  # a group, for get
    assert "security.audit" not in complete("dhara config set security.a")
    check(["extensions.killGraceMs"], "dhara config unset extensions.k")
    check(["paranoid", "standard", "trusted", "yolo"], "dhara config set security.level ")
    check(["fsync"], "dhara config set --project security.audit.durability f")
    check(["true", "false"], "dhara config set security.requireOsSandbox ")
    check([], "dhara config set extensions.callTimeoutMs ")
    check([], "dhara config set security.level paranoid ")  # no third positional


def test_extension_names_from_the_extensions_folder():
    home, dh = extension_home()
    env = {"HOME": home, "DHARA_HOME": dh}
    for line in ("dhara extensions remove ", "dhara config permissions show ",
                 "dhara config permissions reset ", "dhara config permissions approve ",
                 "dhara config permissions revoke ", "dhara doctor --audit-log --extension "):
        check(EXTENSIONS, line, env, any_order=True)
    check(["web-tools"], "dhara config permissions approve w", env)
    check(["zosmaai/web-tools"], "dhara extensions remove @", env)  # '@' is a break character
    check(["zosmaai/web-tools"], "dhara extensions remove @zosmaai/w", env)
    check(["@zosmaai/web-tools"], "dhara extensions remove @", env, breaks=":=")  # an older bash
    check([], "dhara config permissions show web-tools ", env)  # one name only
    # Without DHARA_HOME: $HOME/.dhara; with a ~ in it, as dhara expands it.
    check(EXTENSIONS, "dhara extensions remove ", {"HOME": home}, any_order=True)
    check(EXTENSIONS, "dhara extensions remove ", {"HOME": home, "DHARA_HOME": "~/.dhara"}, any_order=True)
    check([], "dhara extensions remove ", {"HOME": home, "DHARA_HOME": os.path.join(home, "none")})


def test_capabilities_for_approve_and_revoke():
    caps = complete("dhara config permissions approve web-tools ")
    assert "network:fetch" in caps and "filesystem:*" in caps and "process:system-info" in caps, caps
    line = "dhara config permissions approve web-tools network:f"  # COMP_WORDS: network, :, f
    check(["fetch"], line)
    assert applied(line, "fetch") == "dhara config permissions approve web-tools network:fetch"
    line = "dhara config permissions revoke web-tools network:"  # COMP_WORDS end with ":"
    check(["outbound", "fetch", "inbound", "dns", "*"], line)
    assert applied(line, "outbound") == "dhara config permissions revoke web-tools network:outbound"
    # With ':' removed from COMP_WORDBREAKS (a common .bashrc line) the capability is one word.
    check(["network:dns"], line + "d", breaks="=@")
    check([], "dhara config permissions approve web-tools filesystem:read ")
    # "network:*" is offered as written, never globbed against files in the current folder.
    work = tempfile.mkdtemp(prefix="glob-", dir=SCRATCH)
    open(os.path.join(work, "network:x"), "w").close()
    check(["outbound", "fetch", "inbound", "dns", "*"], "dhara config permissions approve w network:", cwd=work)


def test_files_for_calls_and_folders_for_install():
    work = tempfile.mkdtemp(prefix="files-", dir=SCRATCH)
    os.makedirs(os.path.join(work, "web-tools"))
    for name in ("calls.jsonl", "calm.txt"):
        open(os.path.join(work, name), "w").close()
    check(["calls.jsonl", "calm.txt"], "dhara run --calls cal", cwd=work, any_order=True)
    check(["-", "calls.jsonl", "calm.txt", "web-tools"], "dhara run --calls ", cwd=work, any_order=True)
    check(["calls.jsonl"], "dhara run --calls=calls.j", cwd=work)
    check(["web-tools"], "dhara extensions install w", cwd=work)
    check(["web-tools"], "dhara extensions install ", cwd=work)  # folders only


def test_sandbox_exec_completes_the_extension_then_a_command():
    home, dh = extension_home()
    env = {"HOME": home, "DHARA_HOME": dh}
    check(["exec"], "dhara sandbox ")
    check(["web-tools"], "dhara sandbox exec --extension web", env)
    check(["--extension"], "dhara sandbox exec --e")
    assert "python3" in complete("dhara sandbox exec --extension web-tools -- python"), "no program names after --"
    assert "/bin/true" in complete("dhara sandbox exec --extension web-tools -- /bin/tru"), "no paths after --"
    work = tempfile.mkdtemp(prefix="exec-", dir=SCRATCH)
    open(os.path.join(work, "main.py"), "w").close()
    # After the program: its own arguments, files; never dhara's flags.
    check(["main.py"], "dhara sandbox exec --extension web-tools -- python3 ma", cwd=work)
    check([], "dhara sandbox exec --extension web-tools -- python3 --ext", cwd=work)


def test_words_after_a_value_option_are_not_positionals():
    check(["--help", "--calls", "--concurrency", "--mode"], "dhara run --calls - -j 4 --mode auto --")
    check(["paranoid", "standard", "trusted", "yolo"], "dhara config set --add x security.level ")


# ---- consistency with the binary -----------------------------------------------------------

def test_every_subcommand_the_binary_lists_is_offered_and_nothing_else():
    tree = command_tree()
    assert ("config", "permissions", "approve") in tree, sorted(tree)
    for path, text in tree.items():
        listed = help_subcommands(text)
        if not listed:
            continue
        offered = complete(" ".join(("dhara",) + path) + " ")
        assert sorted(offered) == sorted(listed), (
            f"'dhara {' '.join(path)} --help' lists {listed}; the completion offers {offered}: "
            "update scripts/completion/dhara.bash")


def test_every_flag_the_binary_lists_is_offered_and_nothing_else():
    for path, text in command_tree().items():
        listed = help_flags(text)
        assert "--help" in listed, (path, text)
        offered = complete(" ".join(("dhara",) + path) + " -")
        assert sorted(offered) == sorted(listed), (
            f"'dhara {' '.join(path)} --help' lists {listed}; the completion offers {offered}: "
            "update scripts/completion/dhara.bash")


def test_every_setting_key_is_offered():
    keys = [l.split()[0] for l in section(dhara_help("config", "get"), "Keys")]
    assert "security.level" in keys and "extensions.maxLineBytes" in keys, keys
    check(keys, "dhara config set ", any_order=True)
    check(keys, "dhara config unset ", any_order=True)
    groups = sorted(set(complete("dhara config get ")) - set(keys))
    assert groups == ["extensions", "security", "security.audit"], groups
    # Every key takes a value of its type: the closed sets match --help's "a | b | c".
    for line in section(dhara_help("config", "set"), "Keys"):
        key, values = line.split(None, 1)
        if "|" in values:
            expected = [v.strip() for v in values.split("|")]
            check(expected, f"dhara config set {key} ")


def test_every_capability_of_the_catalog_is_offered():
    with open(os.path.join(ROOT, "policy", "capability.cpp")) as f:
        catalog = re.findall(r'\{"([a-z]+:[a-z-]+)",\s*"', f.read())
    assert len(catalog) >= 23 and "agent:model-switch" in catalog, catalog
    groups = sorted({c.split(":")[0] + ":*" for c in catalog})
    offered = complete("dhara config permissions approve x ")
    assert sorted(offered) == sorted(catalog + groups), (
        f"policy/capability.cpp has {catalog}; the completion offers {offered}: update scripts/completion/dhara.bash")
    check(offered, "dhara config permissions revoke x ")


def test_the_script_is_clean_for_shellcheck():
    if not shutil.which("shellcheck"):
        return  # optional tool; the checks above run bash itself
    p = subprocess.run(["shellcheck", "-s", "bash", SCRIPT], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr


if __name__ == "__main__":
    try:
        harness.run(dict(globals()))
    finally:
        shutil.rmtree(SCRATCH, ignore_errors=True)
