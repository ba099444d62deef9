#!/usr/bin/env python3
"""`dhara extensions install <folder>` and `dhara extensions remove <name>` as a user runs them:
real prompts on a pseudo-terminal answered with real keys, installs without a terminal, the
files copied, permissions.json and the audit trail written, refusals (bad manifest, symlink
escape, already installed) leaving nothing behind.

Usage: install_test.py DHARA_BINARY SOURCE_ROOT   (env DHARA_BUILD: the build dir, optional)
Prints `N passed, M failed` last; exits 1 on any failure.
"""
import json
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the shared runner beside this file)

DHARA, SOURCE = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
TEST_EXTENSIONS = os.path.join(SOURCE, "tests", "extensions")
PROMPT = b"(y/n/q) "


class Home:
    """A throwaway HOME with DHARA_HOME inside it, a project to run from, and a place for
    extension folders to install from."""

    def __init__(self, config=None):
        self.root = tempfile.mkdtemp(prefix="dhara-install-")
        self.home = os.path.join(self.root, "home")
        self.dh = os.path.join(self.home, ".dhara")
        self.project = os.path.join(self.root, "project")
        self.src = os.path.join(self.root, "src")
        for d in (self.dh, self.project, self.src):
            os.makedirs(d)
        if config is not None:
            with open(os.path.join(self.dh, "config.json"), "w") as f:
                json.dump(config, f)
        self.env = {"HOME": self.home, "DHARA_HOME": self.dh, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}

    def ext(self, name="web-tools", version="1.0.0", caps=("network:fetch", "network:dns"), author="zosmaai",
            folder=None, **extra):
        """Writes an extension folder with a manifest; returns its path."""
        path = os.path.join(self.src, folder or name.replace("/", "__") + "-" + version)
        os.makedirs(path, exist_ok=True)
        manifest = {"name": name, "version": version, "description": "Fetches pages for tests",
                    "runtime": {"type": "subprocess", "command": "python3 main.py", "protocol": "json-rpc"},
                    "capabilities": list(caps)}
        if author is not None:
            manifest["author"] = author
        manifest.update(extra)
        with open(os.path.join(path, "manifest.json"), "w") as f:
            json.dump(manifest, f)
        with open(os.path.join(path, "main.py"), "w") as f:
            f.write("print('hello')\n")
        return path

    def installed(self, name="web-tools"):
        return os.path.join(self.dh, "extensions", name)

    def dhara(self, *args, stdin=subprocess.DEVNULL):
        """Runs dhara without a terminal: a new session has no controlling tty, so /dev/tty fails."""
        p = subprocess.run([DHARA, *args], cwd=self.project, env=self.env, capture_output=True, text=True,
                           stdin=stdin, timeout=60, start_new_session=True)
        return p.returncode, p.stdout, p.stderr

    def on_terminal(self, *args, keys=()):
        """Runs dhara on a pty and answers each `(y/n/q)` prompt with the next key. Returns (exit
        code, everything the terminal showed, number of prompts seen)."""
        pid, fd = pty.fork()
        if pid == 0:
            try:
                os.chdir(self.project)
                os.execve(DHARA, [DHARA, *args], self.env)
            finally:
                os._exit(127)  # never run the test runner twice
        shown, pending, answered = b"", list(keys), 0
        deadline = time.monotonic() + 60  # a safety net for a prompt nobody answers, not a timing check
        while True:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                break
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break  # the child closed the terminal
            if not chunk:
                break
            shown += chunk
            while pending and shown.count(PROMPT) > answered:
                os.write(fd, pending.pop(0).encode())
                answered += 1
        _, status = os.waitpid(pid, 0)
        os.close(fd)
        return os.waitstatus_to_exitcode(status), shown.decode(errors="replace"), shown.count(PROMPT)

    def perms(self):
        path = os.path.join(self.dh, "permissions.json")
        return json.load(open(path)) if os.path.exists(path) else {}

    def audit(self):
        path = os.path.join(self.dh, "audit.jsonl")
        return [json.loads(l) for l in open(path)] if os.path.exists(path) else []

    def leftovers(self):
        """Anything in the extensions folder that is not an installed extension."""
        d = os.path.join(self.dh, "extensions")
        return [n for n in os.listdir(d) if n.startswith(".")] if os.path.isdir(d) else []

    def close(self):
        shutil.rmtree(self.root, ignore_errors=True)


def web_tools(h, **kw):
    return h.ext(network={"outbound": [{"domain": "api.example.com", "purpose": "the example API"}]}, **kw)


# ---------------------------------------------------------------------------------------
# Prompts on a terminal


def test_standard_shows_the_review_then_one_package_prompt_and_y_approves_bound_to_the_folder():
    h = Home()
    src = web_tools(h)
    code, shown, prompts = h.on_terminal("extensions", "install", src, keys=["y"])
    assert code == 0, (code, shown)
    assert prompts == 1, shown
    review = shown[:shown.index("Install?")]
    for text in ("Extension: web-tools v1.0.0", "zosmaai", "Fetches pages for tests",
                 "network:fetch", "make HTTP(S) requests", "network:dns", "look up host names",
                 "api.example.com — the example API", "python3 main.py"):
        assert text in review, (text, shown)
    assert "web-tools v1.0.0 (zosmaai) requests network:fetch, network:dns\r\nInstall? (y/n/q) y" in shown, shown
    dest = h.installed()
    assert open(os.path.join(dest, "main.py")).read() == "print('hello')\n"
    assert json.load(open(os.path.join(dest, "manifest.json")))["name"] == "web-tools"
    entry = h.perms()["web-tools"]
    assert entry["capabilities"] == {"network:fetch": "approved", "network:dns": "approved"}, entry
    assert entry["version"] == "1.0.0" and entry["approvedBy"] == "user", entry
    assert entry["folder"] == dest, entry
    audit = h.audit()
    assert [(a["extension"], a["capability"], a["action"], a["decidedBy"], a["details"]["change"]) for a in audit] == [
        ("web-tools", "network:fetch", "allowed", "user", "approve"),
        ("web-tools", "network:dns", "allowed", "user", "approve")], audit
    assert all(a["details"]["via"] == "install" and a["details"]["prompt"] == "package" for a in audit), audit
    code, out, _ = h.dhara("config", "permissions", "show", "web-tools")
    assert out == "Extension: web-tools v1.0.0\n  [approved] network:fetch\n  [approved] network:dns\n", out
    code, out, _ = h.dhara("doctor", "--audit-log", "--verify")
    assert code == 0, out
    assert h.leftovers() == []
    h.close()


def test_standard_n_installs_with_every_capability_denied_and_audited():
    h = Home()
    code, shown, prompts = h.on_terminal("extensions", "install", web_tools(h), keys=["n"])
    assert code == 0 and prompts == 1, (code, shown)
    assert os.path.isdir(h.installed())
    assert h.perms()["web-tools"]["capabilities"] == {"network:fetch": "denied", "network:dns": "denied"}
    audit = h.audit()
    assert [(a["capability"], a["action"]) for a in audit] == [("network:fetch", "denied"), ("network:dns", "denied")]
    assert all(a["decidedBy"] == "user" and a["reason"] for a in audit), audit
    assert "dhara config permissions approve web-tools" in shown, shown
    h.close()


def test_q_exits_130_with_nothing_installed_recorded_or_audited():
    h = Home()
    code, shown, _ = h.on_terminal("extensions", "install", web_tools(h), keys=["q"])
    assert code == 130, (code, shown)
    assert "nothing installed" in shown, shown
    assert not os.path.exists(h.installed())
    assert h.perms() == {} and h.audit() == [] and h.leftovers() == []
    h.close()


def test_paranoid_asks_once_per_capability_with_its_meaning():
    h = Home({"security": {"level": "paranoid"}})
    code, shown, prompts = h.on_terminal("extensions", "install", web_tools(h), keys=["y", "n"])
    assert code == 0 and prompts == 2, (code, shown)
    assert "web-tools v1.0.0 (zosmaai) requests network:fetch — make HTTP(S) requests\r\nApprove? (y/n/q) y" in shown
    assert "web-tools v1.0.0 (zosmaai) requests network:dns — look up host names\r\nApprove? (y/n/q) n" in shown
    assert h.perms()["web-tools"]["capabilities"] == {"network:fetch": "approved", "network:dns": "denied"}
    assert [a["details"]["prompt"] for a in h.audit()] == ["capability", "capability"]
    h.close()


def test_paranoid_q_on_the_second_capability_installs_nothing():
    h = Home({"security": {"level": "paranoid"}})
    code, shown, prompts = h.on_terminal("extensions", "install", web_tools(h), keys=["y", "q"])
    assert code == 130 and prompts == 2, (code, shown)
    assert not os.path.exists(h.installed()) and h.perms() == {} and h.audit() == []
    h.close()


def test_trusted_author_installs_without_a_prompt_and_records_nothing():
    h = Home({"security": {"level": "trusted", "trustedAuthors": ["zosmaai"]}})
    code, shown, prompts = h.on_terminal("extensions", "install", web_tools(h))
    assert code == 0 and prompts == 0, (code, shown)
    assert "trustedAuthors" in shown, shown
    assert os.path.isdir(h.installed())
    assert h.perms() == {}  # approved by author on every load, as the session's snapshot does
    code, out, _ = h.dhara("extensions", "install", h.ext(name="other", author="someone else"))
    assert code == 0 and "dhara config permissions approve other --all" in out, out  # not trusted: pending
    h.close()


def test_trusted_level_with_an_untrusted_author_asks_for_the_package():
    h = Home({"security": {"level": "trusted", "trustedAuthors": ["zosmaai"]}})
    code, shown, prompts = h.on_terminal("extensions", "install", web_tools(h, author="mallory"), keys=["y"])
    assert code == 0 and prompts == 1 and "(mallory) requests network:fetch, network:dns" in shown, shown
    h.close()


def test_yolo_says_everything_is_granted_and_does_not_ask():
    h = Home({"security": {"level": "yolo"}})
    code, shown, prompts = h.on_terminal("extensions", "install", web_tools(h))
    assert code == 0 and prompts == 0, (code, shown)
    assert "yolo" in shown and "granted" in shown, shown
    assert os.path.isdir(h.installed()) and h.perms() == {}
    h.close()


def test_no_prompt_flag_on_a_terminal_installs_with_nothing_approved():
    h = Home()
    code, shown, prompts = h.on_terminal("--no-prompt", "extensions", "install", web_tools(h))
    assert code == 0 and prompts == 0, (code, shown)
    assert "dhara config permissions approve web-tools --all" in shown, shown
    assert h.perms() == {}
    h.close()


# ---------------------------------------------------------------------------------------
# Without a terminal


def test_without_a_terminal_it_installs_pending_and_prints_the_command_that_approves():
    h = Home()
    code, out, err = h.dhara("extensions", "install", web_tools(h))
    assert code == 0, (code, out, err)
    assert "Extension: web-tools v1.0.0" in out and "network:fetch" in out, out  # the review is printed too
    assert "  dhara config permissions approve web-tools --all\n" in out, out
    assert os.path.isfile(os.path.join(h.installed(), "main.py"))
    assert h.perms() == {} and h.audit() == []
    code, out, _ = h.dhara("config", "permissions", "show", "web-tools")
    assert out == "Extension: web-tools v1.0.0\n  [pending]  network:fetch\n  [pending]  network:dns\n", out
    # The printed command works as printed.
    code, _, err = h.dhara("config", "permissions", "approve", "web-tools", "--all")
    assert code == 0, err
    assert h.perms()["web-tools"]["capabilities"] == {"network:fetch": "approved", "network:dns": "approved"}
    h.close()


def test_json_output():
    h = Home()
    code, out, _ = h.dhara("extensions", "install", web_tools(h), "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["name"] == "web-tools" and doc["folder"] == h.installed() and doc["replaced"] is False, doc
    assert doc["capabilities"] == {"network:fetch": "pending", "network:dns": "pending"}, doc
    assert doc["approveCommand"] == "dhara config permissions approve web-tools --all", doc
    h.close()


def test_an_approval_given_at_install_is_used_by_the_next_session():
    h = Home()
    with open(os.path.join(h.project, "a.txt"), "w") as f:
        f.write("project text\n")
    code, shown, _ = h.on_terminal("extensions", "install", os.path.join(TEST_EXTENSIONS, "fs-tool"), keys=["y"])
    assert code == 0, (code, shown)
    calls = os.path.join(h.root, "calls.jsonl")
    with open(calls, "w") as f:
        f.write('{"tool": "read", "input": {"path": "a.txt"}}\n')
    code, out, err = h.dhara("--no-prompt", "run", "--calls", calls)
    assert code == 0 and "project text" in out, (code, out, err)
    assert "another folder" not in err, err
    h.close()


# ---------------------------------------------------------------------------------------
# Refusals


def test_a_bad_manifest_exits_2_with_one_sentence_and_copies_nothing():
    h = Home()
    src = h.ext(caps=["network:fech"])
    code, out, err = h.dhara("extensions", "install", src)
    assert code == 2, (code, out, err)
    assert "did you mean 'network:fetch'" in err and len(err.strip().splitlines()) == 1, err
    assert not os.path.exists(h.installed()) and h.leftovers() == []
    empty = os.path.join(h.src, "empty")
    os.makedirs(empty)
    code, _, err = h.dhara("extensions", "install", empty)
    assert code == 2 and "no manifest.json or manifest.yaml" in err, err
    code, _, err = h.dhara("extensions", "install", os.path.join(h.src, "missing"))
    assert code == 2 and "no folder" in err, err
    code, _, err = h.dhara("extensions", "install", "no-such-bundled-thing")
    assert code == 2 and "no bundled extension" in err, err
    h.close()


def test_a_symlink_leading_outside_the_folder_refuses_the_install():
    h = Home()
    ssh = os.path.join(h.home, ".ssh")
    os.makedirs(ssh)
    with open(os.path.join(ssh, "id_ed25519"), "w") as f:
        f.write("PRIVATE KEY\n")
    for name, target in (("keys", ssh), ("key", os.path.join(ssh, "id_ed25519")),
                         ("up", "../../../home/.ssh/id_ed25519"), ("self", "../../web-tools-1.0.0/main.py")):
        src = web_tools(h)
        link = os.path.join(src, "lib", name)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(target, link)
        code, out, err = h.dhara("extensions", "install", src)
        assert code == 2, (name, code, out, err)
        assert "lib/" + name in err and "outside the extension folder" in err, (name, err)
        assert not os.path.exists(h.installed()) and h.leftovers() == [], name
        os.unlink(link)
    # The same key reached through a link swapped inside a link chain is refused too.
    src = web_tools(h)
    os.symlink(".", os.path.join(src, "here"))
    os.symlink("here/here/../../home/.ssh/id_ed25519", os.path.join(src, "chain"))
    code, _, err = h.dhara("extensions", "install", src)
    assert code == 2 and "chain" in err, err
    h.close()


def test_links_inside_the_folder_are_installed_as_plain_files():
    h = Home()
    src = web_tools(h)
    os.makedirs(os.path.join(src, "bin"))
    os.symlink("../main.py", os.path.join(src, "bin", "tool"))
    os.symlink("bin", os.path.join(src, "tools"))
    code, out, err = h.dhara("extensions", "install", src)
    assert code == 0, (code, out, err)
    copied = os.path.join(h.installed(), "bin", "tool")
    assert not os.path.islink(copied) and open(copied).read() == "print('hello')\n"
    assert os.path.isdir(os.path.join(h.installed(), "tools")) and not os.path.islink(os.path.join(h.installed(), "tools"))
    for root, dirs, files in os.walk(h.installed()):
        for n in dirs + files:
            assert not os.path.islink(os.path.join(root, n)), os.path.join(root, n)
    h.close()


def test_dangling_links_and_fifos_are_refused():
    h = Home()
    src = web_tools(h)
    os.symlink("nothing-here", os.path.join(src, "dangling"))
    code, _, err = h.dhara("extensions", "install", src)
    assert code == 2 and "dangling" in err and "does not exist" in err, err
    os.unlink(os.path.join(src, "dangling"))
    os.mkfifo(os.path.join(src, "pipe"))
    code, _, err = h.dhara("extensions", "install", src)
    assert code == 2 and "pipe" in err and "FIFO" in err, err
    assert not os.path.exists(h.installed())
    h.close()


def test_a_folder_that_holds_dhara_home_is_refused():
    h = Home()
    with open(os.path.join(h.home, "manifest.json"), "w") as f:
        json.dump({"name": "home", "version": "1", "runtime": {"type": "subprocess", "command": "x",
                                                               "protocol": "json-rpc"}, "capabilities": []}, f)
    code, _, err = h.dhara("extensions", "install", h.home)
    assert code == 2 and "dhara's own folder" in err, err
    h.close()


def test_manifest_text_cannot_hide_anything_on_the_review_screen():
    h = Home()
    # The manifest parser refuses control characters in the description; a bidi override
    # passes it, and so does anything in a domain's purpose.
    src = h.ext(description="pretend \u202egnp.exe",
                network={"outbound": [{"domain": "api.example.com", "purpose": "x\u001b[2K\u001b[1A\ry"}]})
    code, out, err = h.dhara("extensions", "install", src)
    assert code == 0, (code, out, err)
    assert "\x1b" not in out and "\u202e" not in out, repr(out)
    assert "pretend \\u202egnp.exe" in out and "x\\x1b[2K\\x1b[1A\\x0dy" in out, out
    h.close()


# ---------------------------------------------------------------------------------------
# Installed already, upgrades


def test_already_installed_same_version_says_so_other_version_refuses_with_the_remove_command():
    h = Home()
    assert h.dhara("extensions", "install", web_tools(h))[0] == 0
    code, out, _ = h.dhara("extensions", "install", web_tools(h))
    assert code == 0 and "already installed" in out, out
    code, out, _ = h.dhara("extensions", "install", h.installed())  # the installed folder itself
    assert code == 0 and "already installed" in out, out
    code, out, err = h.dhara("extensions", "install", web_tools(h, version="2.0.0"))
    assert code == 2, (code, out, err)
    assert "dhara extensions remove web-tools" in err and "--upgrade" in err, err
    assert json.load(open(os.path.join(h.installed(), "manifest.json")))["version"] == "1.0.0"
    h.close()


def test_an_extension_installed_as_a_link_is_neither_replaced_nor_written_through():
    # ~/.dhara/extensions/web-tools a link to a development copy: an install or --upgrade
    # said the folder "exists and is not an extension folder". It now says what is there and
    # how to go on, and changes neither the link nor the copy; remove takes the link only.
    h = Home()
    dev = os.path.join(h.root, "dev-web-tools")
    shutil.copytree(web_tools(h), dev)
    os.makedirs(os.path.dirname(h.installed()), exist_ok=True)
    os.symlink(dev, h.installed())
    code, out, _ = h.dhara("extensions", "install", dev)
    assert code == 0 and f"a link to {dev} (the folder given); nothing to do" in out, out
    for flags in ([], ["--upgrade"], ["--force"]):
        code, out, err = h.dhara("extensions", "install", web_tools(h, version="2.0.0"), *flags)
        assert code == 2, (flags, code, out, err)
        assert f"{h.installed()} is a symbolic link to {dev}, and dhara does not install over a link; run " \
               f"'dhara extensions remove web-tools' (it removes the link, not {dev}), then install again" in err, err
        assert os.path.islink(h.installed()) and os.readlink(h.installed()) == dev
        assert json.load(open(os.path.join(dev, "manifest.json")))["version"] == "1.0.0"
    assert h.dhara("extensions", "remove", "web-tools")[0] == 0
    assert not os.path.lexists(h.installed()) and os.path.isfile(os.path.join(dev, "manifest.json"))
    assert h.dhara("extensions", "install", web_tools(h, version="2.0.0"), stdin=subprocess.DEVNULL)[0] == 0
    assert not os.path.islink(h.installed())
    assert json.load(open(os.path.join(h.installed(), "manifest.json")))["version"] == "2.0.0"
    h.close()


def test_upgrade_keeps_approvals_at_standard_and_asks_only_for_new_capabilities():
    h = Home()
    assert h.on_terminal("extensions", "install", web_tools(h), keys=["y"])[0] == 0
    with open(os.path.join(h.installed(), "local-change"), "w") as f:
        f.write("x")
    src = web_tools(h, version="2.0.0", caps=["network:fetch", "network:dns", "filesystem:read"])
    code, shown, prompts = h.on_terminal("extensions", "install", src, "--upgrade", keys=["n"])
    assert code == 0 and prompts == 1, (code, shown)
    assert "web-tools v2.0.0 (zosmaai) requests filesystem:read\r\nInstall? (y/n/q) n" in shown, shown
    entry = h.perms()["web-tools"]
    assert entry["version"] == "2.0.0" and entry["folder"] == h.installed(), entry
    assert entry["capabilities"] == {"network:fetch": "approved", "network:dns": "approved",
                                     "filesystem:read": "denied"}, entry
    assert json.load(open(os.path.join(h.installed(), "manifest.json")))["version"] == "2.0.0"
    assert not os.path.exists(os.path.join(h.installed(), "local-change"))  # replaced whole
    assert h.leftovers() == []
    h.close()


def test_an_upgrade_that_reaches_further_asks_again_for_what_it_widens():
    # At standard an upgrade kept every approval: a new version whose process.commands added
    # `bash`, or that dropped its network.outbound list (any host), ran with the approvals
    # given for `git` and api.example.com, and nobody was asked (a review).
    h = Home()
    caps = ["network:fetch", "process:spawn", "filesystem:read"]
    v1 = h.ext(version="1.0.0", caps=caps, network={"outbound": [{"domain": "api.example.com", "purpose": "API"}]},
               process={"commands": ["git"]})
    assert h.on_terminal("extensions", "install", v1, keys=["y"])[0] == 0
    entry = h.perms()["web-tools"]
    assert entry["scope"] == {"network.outbound": ["api.example.com"], "process.commands": ["git"]}, entry
    # 2.0.0 runs bash too: only process:spawn is asked again; "n" denies it.
    v2 = h.ext(version="2.0.0", caps=caps, network={"outbound": [{"domain": "api.example.com", "purpose": "API"}]},
               process={"commands": ["git", "bash"]})
    code, shown, prompts = h.on_terminal("extensions", "install", v2, "--upgrade", keys=["n"])
    assert code == 0 and prompts == 1, (code, shown)
    assert "web-tools v2.0.0 (zosmaai) requests process:spawn\r\nInstall? (y/n/q) n" in shown, shown
    entry = h.perms()["web-tools"]
    assert entry["capabilities"] == {"network:fetch": "approved", "filesystem:read": "approved",
                                     "process:spawn": "denied"}, entry
    assert entry["scope"]["process.commands"] == ["git", "bash"], entry
    # 3.0.0 drops the host list, without a terminal: network:fetch is pending, not approved,
    # for the install, for `show` and for a session.
    v3 = h.ext(version="3.0.0", caps=caps, process={"commands": ["git", "bash"]})
    code, out, err = h.dhara("extensions", "install", v3, "--upgrade")
    assert code == 0 and "pending:  network:fetch" in out, (code, out, err)
    code, out, err = h.dhara("config", "permissions", "show", "web-tools")
    assert code == 0 and "[pending]  network:fetch" in out and "[approved] network:fetch" not in out, (out, err)
    code, out, err = h.dhara("config", "permissions", "list")
    assert code == 0 and "1 approved, 1 denied, 1 pending" in out, (out, err)
    # A narrower list asks nothing.
    v4 = h.ext(version="4.0.0", caps=caps, network={"outbound": []}, process={"commands": ["git"]})
    code, out, err = h.dhara("config", "permissions", "approve", "web-tools", "network:fetch")
    assert code == 0, err
    code, out, err = h.dhara("extensions", "install", v4, "--upgrade")
    assert code == 0 and "pending" not in out, (code, out, err)
    h.close()


def test_an_entry_recorded_before_scopes_is_compared_with_the_manifest_it_replaces():
    # Entries written before dhara kept scopes have none: an upgrade adding `bash` kept
    # process:spawn approved, and the next decision recorded the wider lists (a review).
    h = Home()
    caps = ["network:fetch", "process:spawn", "filesystem:read"]
    v1 = h.ext(version="1.0.0", caps=caps, process={"commands": ["git"]})
    assert h.dhara("extensions", "install", v1)[0] == 0
    assert h.dhara("config", "permissions", "approve", "web-tools", "--all")[0] == 0
    perms = h.perms()
    del perms["web-tools"]["scope"]  # as an older dhara wrote it
    with open(os.path.join(h.dh, "permissions.json"), "w") as f:
        json.dump(perms, f)
    v2 = h.ext(version="2.0.0", caps=caps, process={"commands": ["git", "bash"]})
    code, out, err = h.dhara("extensions", "install", v2, "--upgrade")
    assert code == 0 and "pending:  process:spawn" in out, (code, out, err)
    entry = h.perms()["web-tools"]
    assert entry["scope"] == {"network.outbound": None, "process.commands": ["git"]}, entry
    code, out, err = h.dhara("config", "permissions", "show", "web-tools")
    assert "[pending]  process:spawn" in out and "[approved] network:fetch" in out, out
    # The next decision does not take the wider list as seen: process:spawn stays unapproved.
    assert h.dhara("config", "permissions", "revoke", "web-tools", "filesystem:read")[0] == 0
    entry = h.perms()["web-tools"]
    assert "process:spawn" not in entry["capabilities"] and entry["scope"]["process.commands"] == ["git", "bash"], entry
    h.close()


def test_upgrade_at_paranoid_asks_again_for_everything():
    h = Home({"security": {"level": "paranoid"}})
    assert h.on_terminal("extensions", "install", web_tools(h), keys=["y", "y"])[0] == 0
    src = web_tools(h, version="2.0.0")
    code, shown, prompts = h.on_terminal("extensions", "install", src, "--force", keys=["y", "n"])
    assert code == 0 and prompts == 2, (code, shown)
    assert h.perms()["web-tools"]["capabilities"] == {"network:fetch": "approved", "network:dns": "denied"}
    h.close()


def test_one_change_after_an_upgrade_at_paranoid_brings_back_nothing_else():
    # Upgraded without a terminal, everything is pending; one revocation (or approval) of one
    # capability then recorded the new version and kept every state given to the old one:
    # network:fetch came back approved for 2.0.0 with no decision about it (a review).
    h = Home({"security": {"level": "paranoid"}})
    assert h.on_terminal("extensions", "install", web_tools(h), keys=["y", "y"])[0] == 0
    code, out, err = h.dhara("extensions", "install", web_tools(h, version="2.0.0"), "--force")
    assert code == 0 and "pending:  network:fetch, network:dns" in out, (code, out, err)
    # `show` says what a session holds: nothing given to 1.0.0 (it said approved, twice).
    code, out, err = h.dhara("config", "permissions", "show", "web-tools")
    assert code == 0 and out.count("[pending]") == 2 and "[approved]" not in out, (out, err)
    code, out, err = h.dhara("config", "permissions", "revoke", "web-tools", "network:dns")
    assert code == 0, err
    entry = h.perms()["web-tools"]
    assert entry["version"] == "2.0.0" and entry["capabilities"] == {"network:dns": "denied"}, entry
    code, out, err = h.dhara("config", "permissions", "approve", "web-tools", "network:dns")
    assert code == 0 and h.perms()["web-tools"]["capabilities"] == {"network:dns": "approved"}, h.perms()
    h.close()


def test_an_approval_the_trail_cannot_hold_is_not_made():
    # Approvals were recorded first and audited after: with the trail unwritable, the command
    # exited 1 but the approval stayed in force, with no line showing it (a review).
    h = Home()
    os.makedirs(os.path.join(h.dh, "audit.jsonl"))  # a folder: every append fails
    code, shown, _ = h.on_terminal("extensions", "install", web_tools(h), keys=["y"])
    assert code == 1 and "its answers could not be audited, so none was recorded" in shown, (code, shown)
    assert "web-tools" not in h.perms(), h.perms()
    code, out, err = h.dhara("config", "permissions", "approve", "web-tools", "network:fetch")
    assert code == 1 and "nothing was approved: the approval could not be audited" in err, (code, out, err)
    assert "web-tools" not in h.perms(), h.perms()
    # A revocation is made, and says its line is missing: it takes away, never grants.
    code, out, err = h.dhara("config", "permissions", "revoke", "web-tools", "network:fetch")
    assert code == 1 and "the change was made but could not be audited" in err, (code, out, err)
    assert h.perms()["web-tools"]["capabilities"] == {"network:fetch": "denied"}, h.perms()
    h.close()


def test_an_approval_a_wider_denial_still_covers_says_so():
    # After `revoke 'network:*'`, `approve network:fetch` said approved and every call stayed
    # denied, whose reason suggested the same command again (a review).
    h = Home()
    assert h.dhara("extensions", "install", web_tools(h))[0] == 0
    assert h.dhara("config", "permissions", "revoke", "web-tools", "network:*")[0] == 0
    code, out, err = h.dhara("config", "permissions", "approve", "web-tools", "network:fetch")
    assert code == 0 and out == "web-tools: network:fetch approved\n", (code, out, err)
    assert ("dhara: warning: network:fetch stays denied for web-tools: 'network:*' is recorded as denied, and a "
            "denial wins; approve that, or 'dhara config permissions reset web-tools' and approve what it needs\n") in err, err
    code, out, err = h.dhara("config", "permissions", "approve", "web-tools", "network:dns")
    assert code == 0 and "stays denied" in err, err
    assert h.dhara("config", "permissions", "approve", "web-tools", "network:*")[0] == 0
    code, out, err = h.dhara("config", "permissions", "approve", "web-tools", "network:fetch")
    assert code == 0 and "stays denied" not in err, err
    h.close()


def test_removing_an_extension_under_a_linked_scope_deletes_nothing_it_links_to():
    # `@dev` linked to a development tree: remove renamed the real folder through the link into
    # its trash and deleted it (a review).
    h = Home()
    src = h.ext(name="@dev/tool", folder=os.path.join("devtree", "tool"))
    os.makedirs(os.path.join(h.dh, "extensions"), exist_ok=True)
    scope_src = os.path.dirname(src)
    os.symlink(scope_src, os.path.join(h.dh, "extensions", "@dev"))
    code, out, err = h.dhara("extensions", "remove", "@dev/tool", "--yes")
    assert code == 1 and "is a link, so @dev/tool lies in the folder it links to" in err, (code, out, err)
    assert os.path.isfile(os.path.join(src, "manifest.json")), os.listdir(scope_src)
    h.close()


def test_approvals_for_another_folder_are_not_inherited():
    h = Home()
    with open(os.path.join(h.dh, "permissions.json"), "w") as f:
        json.dump({"web-tools": {"version": "1.0.0", "capabilities": {"network:fetch": "approved"},
                                 "folder": "/somewhere/else/web-tools"}}, f)
    code, out, err = h.dhara("extensions", "install", web_tools(h))
    assert code == 0 and "inherits nothing" in err, err
    assert "pending:  network:fetch, network:dns" in out, out
    # `show` and `list` say what a session holds: nothing of that entry (they said approved).
    code, out, err = h.dhara("config", "permissions", "show", "web-tools")
    assert code == 0 and "[approved]" not in out and "[pending]  network:fetch" in out, (out, err)
    code, out, err = h.dhara("config", "permissions", "list")
    assert code == 0 and "0 approved, 0 denied, 2 pending" in out, (out, err)
    h.close()


# ---------------------------------------------------------------------------------------
# Scoped names, bundled extensions


def test_a_scoped_name_keeps_its_scope_folder_and_removes_cleanly():
    h = Home()
    src = h.ext(name="@zosmaai/web-tools")
    code, shown, _ = h.on_terminal("extensions", "install", src, keys=["y"])
    assert code == 0, shown
    dest = os.path.join(h.dh, "extensions", "@zosmaai", "web-tools")
    assert os.path.isfile(os.path.join(dest, "manifest.json"))
    assert h.perms()["@zosmaai/web-tools"]["folder"] == dest
    code, out, err = h.dhara("extensions", "remove", "@zosmaai/web-tools")
    assert code == 0, (out, err)
    assert not os.path.exists(os.path.join(h.dh, "extensions", "@zosmaai"))
    assert "@zosmaai/web-tools" not in h.perms()
    h.close()


def test_a_bundled_extension_installs_by_name():
    h = Home()
    # A copy of dhara with its own bundled folder beside it, as a build tree has.
    bindir = os.path.join(h.root, "bin")
    os.makedirs(os.path.join(bindir, "extensions"))
    shutil.copy2(DHARA, os.path.join(bindir, "dhara"))
    shutil.copytree(os.path.join(TEST_EXTENSIONS, "echo-py"), os.path.join(bindir, "extensions", "echo-py"))
    p = subprocess.run([os.path.join(bindir, "dhara"), "extensions", "install", "echo-py"], cwd=h.project, env=h.env,
                       capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60, start_new_session=True)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert os.path.isfile(os.path.join(h.installed("echo-py"), "main.py"))
    # The real bundled std extension, when the build tree has it.
    build = os.environ.get("DHARA_BUILD", os.path.dirname(DHARA))
    std = os.path.join(os.path.dirname(DHARA), "extensions", "std")
    if any(os.path.exists(os.path.join(std, m)) for m in ("manifest.json", "manifest.yaml")):
        code, out, err = h.dhara("extensions", "install", "std")
        assert code == 0, (build, out, err)
        assert os.path.isdir(h.installed("std"))
    h.close()


# ---------------------------------------------------------------------------------------
# remove


def test_remove_deletes_the_folder_and_the_permissions_and_audits_a_reset():
    h = Home()
    assert h.on_terminal("extensions", "install", web_tools(h), keys=["y"])[0] == 0
    code, out, err = h.dhara("extensions", "remove", "web-tools")
    assert code == 0, (code, out, err)
    assert not os.path.exists(h.installed()) and "web-tools" not in h.perms() and h.leftovers() == []
    last = h.audit()[-1]
    assert (last["extension"], last["capability"], last["action"], last["decidedBy"], last["details"]["change"]) == (
        "web-tools", "*", "denied", "user", "reset"), last
    code, out, _ = h.dhara("doctor", "--audit-log", "--verify")
    assert code == 0, out
    h.close()


def test_remove_of_an_unknown_name_exits_2_naming_it_and_the_closest():
    h = Home()
    assert h.dhara("extensions", "install", web_tools(h))[0] == 0
    code, _, err = h.dhara("extensions", "remove", "web-tool")
    assert code == 2 and "'web-tool'" in err and "did you mean 'web-tools'" in err, err
    assert os.path.isdir(h.installed())
    code, _, err = h.dhara("extensions", "remove", "../home")
    assert code == 2, err
    h.close()


def test_remove_asks_on_a_terminal_unless_yes():
    h = Home()
    assert h.dhara("extensions", "install", web_tools(h))[0] == 0
    code, shown, prompts = h.on_terminal("extensions", "remove", "web-tools", keys=["n"])
    assert code == 3 and prompts == 1 and os.path.isdir(h.installed()), (code, shown)
    code, shown, prompts = h.on_terminal("extensions", "remove", "web-tools", keys=["q"])
    assert code == 130 and os.path.isdir(h.installed()), (code, shown)
    code, shown, prompts = h.on_terminal("extensions", "remove", "web-tools", keys=["y"])
    assert code == 0 and not os.path.exists(h.installed()), (code, shown)
    assert h.dhara("extensions", "install", web_tools(h))[0] == 0
    code, shown, prompts = h.on_terminal("extensions", "remove", "web-tools", "--yes")
    assert code == 0 and prompts == 0 and not os.path.exists(h.installed()), (code, shown)
    h.close()


def test_help_shows_examples():
    h = Home()
    for cmd in ("install", "remove"):
        code, out, _ = h.dhara("extensions", cmd, "--help")
        assert code == 0 and "Examples:" in out and "dhara extensions " + cmd in out, out
    h.close()


if __name__ == "__main__":
    harness.run(globals())
