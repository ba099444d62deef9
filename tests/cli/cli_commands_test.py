#!/usr/bin/env python3
"""`dhara config permissions …` and `dhara doctor --audit-log …` run as a user would, on a copy
of the bundled demo home with the example extensions (examples/extensions) installed and a
hand-written permissions.json in the seed's shape.

Usage: cli_commands_test.py DHARA_BINARY EXAMPLES_DEMO_DIR
Prints `N passed, M failed` last; exits 1 on any failure.
"""
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the shared runner beside this file)

DHARA, DEMO = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
EXAMPLES = os.path.join(os.path.dirname(DEMO), "extensions")

# As a user might write it by hand: web-tools exactly as in the seed (network:dns is recorded
# although the example does not declare it: `show` lists stored keys as written), a group
# wildcard for file-stats, and an entry left behind by an extension that is not installed.
PERMISSIONS = {
    "web-tools": {"version": "1.0.0",
                  "capabilities": {"network:fetch": "approved", "network:dns": "approved",
                                   "filesystem:write": "denied"},
                  "approvedAt": "2026-05-14T10:00:00Z", "approvedBy": "user"},
    "file-stats": {"version": "1.0.0", "capabilities": {"filesystem:*": "approved"}},
    "shell-tools": {"version": "2.0.0", "capabilities": {"process:spawn": "approved"}},
}


class Home:
    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="dhara-perm-cli-")
        shutil.copytree(DEMO, self.root, dirs_exist_ok=True)
        self.dh = os.path.join(self.root, "home", ".dhara")
        for name in ("web-tools", "notes", "file-stats"):  # installed = a folder in extensions/
            shutil.copytree(os.path.join(EXAMPLES, name), os.path.join(self.dh, "extensions", name))
        with open(os.path.join(self.dh, "permissions.json"), "w") as f:
            json.dump(PERMISSIONS, f, indent=2)
        self.env = {"HOME": os.path.join(self.root, "home"), "DHARA_HOME": self.dh, "PATH": os.environ["PATH"]}

    def run(self, *args):
        return self.dhara("config", "permissions", *args)

    def dhara(self, *args):
        p = subprocess.run([DHARA, *args], cwd=os.path.join(self.root, "project"),
                           env=self.env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=30)
        return p.returncode, p.stdout, p.stderr

    def audit(self):
        path = os.path.join(self.dh, "audit.jsonl")
        return [json.loads(l) for l in open(path)] if os.path.exists(path) else []

    def close(self):
        shutil.rmtree(self.root, ignore_errors=True)


def test_show_prints_the_seed_format_byte_for_byte():
    h = Home()
    code, out, _ = h.run("show", "web-tools")
    assert code == 0
    assert out == ("Extension: web-tools v1.0.0\n"
                   "  [approved] network:fetch\n"
                   "  [approved] network:dns\n"
                   "  [denied]   filesystem:write\n"), repr(out)
    code, out, _ = h.run("show", "notes")
    assert out == "Extension: notes v0.1.0\n  [pending]  filesystem:write\n", repr(out)
    code, out, _ = h.run("show", "file-stats")  # a stored wildcard is shown as written
    assert "  [approved] filesystem:*\n" in out, repr(out)
    h.close()


def test_list_and_json():
    h = Home()
    code, out, _ = h.run("list")
    assert code == 0 and "web-tools" in out and "2 approved, 1 denied, 0 pending" in out, out
    code, out, _ = h.run("list", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["notes"]["pending"] == 1 and rows["web-tools"]["denied"] == 1, rows
    code, out, _ = h.run("show", "web-tools", "--json")
    assert json.loads(out)["capabilities"]["filesystem:write"] == "denied", out
    h.close()


def test_show_and_list_say_what_a_trusted_author_or_yolo_grants():
    # At `trusted` a trusted author's pending capabilities are granted, at `yolo` every one;
    # show and list printed them pending or denied while sessions granted them (a review).
    h = Home()
    assert h.dhara("config", "unset", "security.level", "--project")[0] == 0  # the demo project's "standard"
    assert h.dhara("config", "set", "security.level", "trusted")[0] == 0
    assert h.dhara("config", "set", "security.trustedAuthors", '["zosmaai"]')[0] == 0
    h.run("reset", "web-tools")
    code, out, _ = h.run("show", "web-tools")
    assert (code, out) == (0, "Extension: web-tools v1.0.0\n  [approved] network:fetch  (trusted author zosmaai)\n"), out
    code, out, _ = h.run("show", "notes")  # not a trusted author: as at standard
    assert out == "Extension: notes v0.1.0\n  [pending]  filesystem:write\n", repr(out)
    code, out, _ = h.run("list")
    assert [l for l in out.splitlines() if l.startswith("web-tools")][0].endswith("1 approved, 0 denied, 0 pending"), out
    h.run("revoke", "web-tools", "network:fetch")  # the user's denial stands at trusted
    code, out, _ = h.run("show", "web-tools")
    assert out == "Extension: web-tools v1.0.0\n  [denied]   network:fetch\n", repr(out)
    assert h.dhara("config", "set", "security.level", "yolo")[0] == 0
    code, out, _ = h.run("show", "web-tools")
    assert out == ("Extension: web-tools v1.0.0\n"
                   "  [approved] network:fetch  (security level yolo; recorded: denied)\n"), repr(out)
    code, out, _ = h.run("show", "notes", "--json")
    shown = json.loads(out)
    assert (shown["capabilities"], shown["grantedBy"]) == (
        {"filesystem:write": "approved"}, {"filesystem:write": "security level yolo"}), shown
    h.close()


def test_a_group_approval_says_what_it_grants_of_the_manifest():
    # The docs' own `approve web-tools 'network:*'` warned that web-tools does not declare it,
    # which the docs read as "grants nothing", while it granted network:fetch (a review).
    h = Home()
    h.run("reset", "web-tools")
    code, out, err = h.run("approve", "web-tools", "network:*")
    assert code == 0 and "warning" not in err, (code, out, err)
    assert "network:* covers network:fetch, which web-tools declares" in err, err
    code, out, err = h.run("approve", "web-tools", "secrets:env")  # declares nothing of it
    assert "warning: web-tools does not declare secrets:env; recorded anyway (it grants nothing" in err, err
    h.close()


def test_names_from_a_hand_edited_file_cannot_drive_the_terminal():
    # A hand-edited (or planted) permissions.json reached the terminal raw: an escape sequence
    # in a key or a version could clear the screen or fake lines in `list` and `show` (a review).
    h = Home()
    perms = json.load(open(os.path.join(h.dh, "permissions.json")))
    perms["shell-tools"]["version"] = "2.0.0\x1b[2J\rfake"
    perms["shell-tools"]["capabilities"]["process:\x1b]0;title\x07x"] = "denied"
    perms["\x1b[31mred"] = {"version": "1", "capabilities": {}}
    json.dump(perms, open(os.path.join(h.dh, "permissions.json"), "w"))
    for args in (("list",), ("show", "shell-tools")):
        code, out, err = h.run(*args)
        assert code == 0 and "\x1b" not in out and "\x07" not in out and "\r" not in out, (args, out, err)
    code, out, _ = h.run("show", "shell-tools")
    assert "Extension: shell-tools v2.0.0?[2J?fake\n" in out and "  [denied]   process:?]0;title?x\n" in out, repr(out)
    # ...nor through the closest name an unknown one is told (ESC c resets a terminal).
    perms["shell-tool\x1bc"] = perms.pop("\x1b[31mred")
    json.dump(perms, open(os.path.join(h.dh, "permissions.json"), "w"))
    code, _, err = h.run("show", "shell-tool_c")  # one edit from the planted name
    assert code == 2 and "did you mean" in err and "\x1b" not in err, repr(err)
    h.close()


def test_unknown_names_exit_2_with_the_closest():
    h = Home()
    code, _, err = h.run("show", "web-tool")
    assert code == 2 and "did you mean 'web-tools'" in err, err
    before = open(os.path.join(h.dh, "permissions.json")).read()
    code, _, err = h.run("approve", "web-tools", "network:fech")
    assert code == 2 and "did you mean 'network:fetch'" in err, err
    assert open(os.path.join(h.dh, "permissions.json")).read() == before  # nothing changed
    code, _, err = h.run("approve", "web-tools")
    assert code == 2 and "--all" in err, err
    h.close()


def test_revoke_approve_reset_change_the_file_and_are_audited():
    h = Home()
    assert h.run("revoke", "web-tools", "network:fetch")[0] == 0
    assert "  [denied]   network:fetch\n" in h.run("show", "web-tools")[1]
    assert h.run("approve", "notes", "--all")[0] == 0
    assert h.run("show", "notes")[1] == "Extension: notes v0.1.0\n  [approved] filesystem:write\n"
    assert h.run("approve", "web-tools", "process:spawn")[0] == 0  # not declared: recorded, warned
    assert h.run("reset", "web-tools")[0] == 0
    code, out, _ = h.run("show", "web-tools")  # back to what the manifest declares, all pending
    assert out == "Extension: web-tools v1.0.0\n  [pending]  network:fetch\n", repr(out)
    assert h.run("reset", "web-tools")[0] == 2  # nothing recorded any more
    perms = json.load(open(os.path.join(h.dh, "permissions.json")))
    assert "web-tools" not in perms and perms["notes"]["capabilities"] == {"filesystem:write": "approved"}, perms
    audit = h.audit()
    changes = [(a["extension"], a["capability"], a["action"], a["details"]["change"]) for a in audit]
    assert changes == [("web-tools", "network:fetch", "denied", "revoke"),
                       ("notes", "filesystem:write", "allowed", "approve"),
                       ("web-tools", "process:spawn", "allowed", "approve"),
                       ("web-tools", "*", "denied", "reset")], changes
    assert all(a["decidedBy"] == "user" for a in audit) and [a["seq"] for a in audit] == [1, 2, 3, 4]
    h.close()


def test_audit_log_lists_filters_and_verifies():
    h = Home()
    code, out, _ = h.dhara("doctor", "--audit-log", "--verify")  # nothing written yet
    assert (code, out) == (0, f"audit trail OK: no entries yet in {h.dh}\n"), (code, out)
    # On a machine where dhara never ran the folder is not there yet: still no entries, exit 0
    # (it said "… does not exist", exit 1, a broken chain's code: a review).
    fresh = dict(h.env, DHARA_HOME=os.path.join(h.dh, "never-made"))
    p = subprocess.run([DHARA, "doctor", "--audit-log", "--verify"], env=fresh, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=60)
    assert (p.returncode, p.stdout, p.stderr) == (
        0, f"audit trail OK: no entries yet in {fresh['DHARA_HOME']} (the folder does not exist yet)\n", ""), p
    assert not os.path.exists(fresh["DHARA_HOME"])  # verifying made nothing
    h.run("revoke", "web-tools", "network:fetch")
    h.run("approve", "notes", "filesystem:write")
    h.run("reset", "shell-tools")  # recorded, not installed: still resettable
    code, out, _ = h.dhara("doctor", "--audit-log")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["TIME", "EXTENSION", "CAPABILITY", "ACTION", "SUBJECT", "REASON"], out
    assert len(lines) == 4 and "\033[" not in out, out  # no colour when stdout is not a terminal
    code, out, _ = h.dhara("doctor", "--audit-log", "--extension", "web-tools")
    assert len(out.splitlines()) == 2 and "revoked by the user" in out, out
    # A name no entry carries (a typo) is told apart from entries that do not match.
    code, out, err = h.dhara("doctor", "--audit-log", "--extension", "web-tool")
    assert code == 0 and out == "No audit entries match.\n", out
    assert err == "dhara: note: no audit entry names the extension 'web-tool' (did you mean 'web-tools'?)\n", err
    code, out, err = h.dhara("doctor", "--audit-log", "--extension", "web-tool", "--json")
    assert code == 0 and out == "" and "no audit entry names the extension 'web-tool'" in err, (out, err)
    code, out, err = h.dhara("doctor", "--audit-log", "--extension", "notes", "--denied-only")
    assert code == 0 and out == "No audit entries match.\n" and err == "", (out, err)
    code, out, _ = h.dhara("doctor", "--audit-log", "--denied-only")
    assert len(out.splitlines()) == 3 and "notes" not in out, out
    code, out, _ = h.dhara("doctor", "--audit-log", "--json", "-n", "1")
    assert json.loads(out)["capability"] == "*", out
    code, out, _ = h.dhara("doctor", "--audit-log", "--since", "1h")
    assert len(out.splitlines()) == 4, out
    code, _, err = h.dhara("doctor", "--audit-log", "--since", "yesterday")
    assert code == 2 and "--since" in err, err
    # An ISO time is an instant, compared as one: a zone is taken into account, and a date or
    # time that cannot be is refused rather than compared as text.
    now = datetime.datetime.now(datetime.timezone.utc)
    plus5 = datetime.timezone(datetime.timedelta(hours=5))
    for since, lines in [((now - datetime.timedelta(hours=1)).astimezone(plus5).strftime("%Y-%m-%dT%H:%M:%S+05:00"), 4),
                         ((now + datetime.timedelta(hours=1)).astimezone(plus5).strftime("%Y-%m-%dT%H:%M:%S+05:00"), 1),
                         ((now - datetime.timedelta(minutes=30)).strftime("%Y-%m-%d %H:%M"), 4),
                         ((now + datetime.timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%S.250Z"), 1),
                         ((now - datetime.timedelta(hours=2)).astimezone(plus5).strftime("%Y-%m-%dT%H+05"), 4),
                         ("2000-01-01", 4)]:
        code, out, _ = h.dhara("doctor", "--audit-log", "--since", since)
        assert code == 0 and len(out.splitlines()) == lines, (since, out)
    for bad in ["2026-13-01", "2026-02-30", "2026-12-07T25:00", "2026-12-07x", "2026-12-07T10:00+5"]:
        code, _, err = h.dhara("doctor", "--audit-log", "--since", bad)
        assert code == 2 and "is not a duration" in err and "ISO time" in err, (bad, err)
    code, out, _ = h.dhara("doctor", "--audit-log", "--verify")
    assert (code, out) == (0, "audit trail OK: 3 lines in 1 file, seq 1 to 3\n"), (code, out)
    # An edited field breaks the chain at that line; a removed line breaks the sequence.
    path = os.path.join(h.dh, "audit.jsonl")
    original = open(path).read().splitlines(keepends=True)
    open(path, "w").write(original[0] + original[1].replace('"allowed"', '"denied" ') + original[2])
    code, out, _ = h.dhara("doctor", "--audit-log", "--verify")
    assert code == 1 and "audit.jsonl line 2" in out, out
    open(path, "w").write(original[0] + original[2])
    code, out, _ = h.dhara("doctor", "--audit-log", "--verify")
    assert code == 1 and "line 2" in out, out
    # The first line cut from the only file: no rotation made this (rotation keeps an older
    # file), and the new first line's own hash cannot be checked, so an edit of it went unseen
    # (a review rewrote a denial there as allowed, and verify said OK). A break now.
    open(path, "w").write(original[1].replace('"allowed"', '"denied" ') + original[2])
    code, out, _ = h.dhara("doctor", "--audit-log", "--verify")
    assert code == 1 and out.startswith("audit trail broken: ") and "audit.jsonl line 1: the trail starts at seq 2: " \
        "seq 1 is missing and no older file is left, though rotation keeps one" in out, (code, out)
    code, out, _ = h.dhara("doctor")
    assert code == 1 and "BROKEN" in out and "before it verified" not in out, out
    h.close()


if __name__ == "__main__":
    harness.run(globals())
