#!/usr/bin/env python3
"""Spawn overhead of the OS sandbox launcher: `/usr/bin/true` started plainly and through
`dhara-launch` with a minimal profile (no network, no spawn: Landlock + seccomp, no masks),
with a mask (adds the user+mount namespace), and with a folder and a file masked inside a
write grant (adds the pins of the folders between), interleaved in one run so machine noise
hits all alike. Prints the median per spawn and the difference.

Usage: sandbox_spawn.py BUILD_DIR [N=200]
"""
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

build = os.path.abspath(sys.argv[1])
n = int(sys.argv[2]) if len(sys.argv) > 2 else 200
launcher = os.path.join(build, "dhara-launch")
true = os.path.realpath("/usr/bin/true")
ldso = os.path.realpath("/lib64/ld-linux-x86-64.so.2")
root = tempfile.mkdtemp(prefix="dhara-spawn-")
tmp = os.path.join(root, "tmp")
os.makedirs(os.path.join(root, "proj", "secret"))
os.makedirs(os.path.join(root, "work", "config", "keys"))
open(os.path.join(root, "work", "config", "token.txt"), "w").close()
os.makedirs(tmp)


def profile(name, **extra):
    p = {"version": 2, "read": ["/usr", "/etc/ld.so.cache"], "write": [tmp, "/dev/null"],
         "execute": [true, ldso], "tempDir": tmp}
    p.update(extra)
    path = os.path.join(root, name)
    with open(path, "w") as f:
        json.dump(p, f)
    return path


plain_argv = [true]
ll_argv = [launcher, "--profile", profile("p.json"), "--", true]
mask_argv = [launcher, "--profile", profile("m.json", read=["/usr", "/etc/ld.so.cache", root + "/proj"],
                                            mask=[root + "/proj/secret"]), "--", true]
pin_argv = [launcher, "--profile", profile("w.json", write=[tmp, "/dev/null", root + "/work"],
                                           mask=[root + "/work/config/keys", root + "/work/config/token.txt"]), "--", true]


def once(argv):
    t = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, {})
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, argv
    return (time.perf_counter() - t) * 1000


samples = {"plain": [], "launcher": [], "launcher+mask": [], "launcher+pins": []}
for _ in range(n):
    samples["plain"].append(once(plain_argv))
    samples["launcher"].append(once(ll_argv))
    samples["launcher+mask"].append(once(mask_argv))
    samples["launcher+pins"].append(once(pin_argv))
shutil.rmtree(root, ignore_errors=True)
med = {k: statistics.median(v) for k, v in samples.items()}
print(f"spawn of /usr/bin/true, median of {n}: plain {med['plain']:.3f} ms, "
      f"dhara-launch {med['launcher']:.3f} ms (+{med['launcher'] - med['plain']:.3f} ms), "
      f"with a mask {med['launcher+mask']:.3f} ms (+{med['launcher+mask'] - med['plain']:.3f} ms), "
      f"with two masks in a write grant {med['launcher+pins']:.3f} ms (+{med['launcher+pins'] - med['plain']:.3f} ms)")
