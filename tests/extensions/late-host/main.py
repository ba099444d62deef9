#!/usr/bin/env python3
# late-host: test extension whose work goes on after dhara gave up on the call. Tool
# `read_later` {path, delay_ms=800} waits, then asks host/fs/read for the path, then answers
# (tools/cancel is ignored); `wait` {ms=1000} answers after ms. Each call runs on its own thread,
# the main thread reads stdin.
import itertools
import json
import sys
import threading
import time

lock = threading.Lock()
waiters = {}  # host request id → [event, answer]
host_ids = itertools.count(1)

TOOLS = [
    {"name": "read_later", "description": "After delay_ms, read path through the host API",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "delay_ms": {"type": "integer"}}},
     "capabilities": ["filesystem:read"]},
    {"name": "wait", "description": "Answer after ms milliseconds",
     "parameters": {"type": "object", "properties": {"ms": {"type": "integer"}}}, "capabilities": []},
]


def send(msg):
    with lock:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def text(t):
    return {"content": [{"type": "text", "text": t}]}


def read_later(id_, inp):
    time.sleep(inp.get("delay_ms", 800) / 1000)
    hid = f"h{next(host_ids)}"
    waiters[hid] = [threading.Event(), None]
    send({"jsonrpc": "2.0", "id": hid, "method": "host/fs/read", "params": {"path": inp["path"]}})
    waiters[hid][0].wait(10)
    send({"jsonrpc": "2.0", "id": id_, "result": text(json.dumps(waiters[hid][1])[:200])})


def wait(id_, ms):
    time.sleep(ms / 1000)
    send({"jsonrpc": "2.0", "id": id_, "result": text("waited")})


for raw in sys.stdin:
    msg = json.loads(raw)
    if "method" not in msg:  # an answer to a host request
        if msg.get("id") in waiters:
            waiters[msg["id"]][1] = msg
            waiters[msg["id"]][0].set()
        continue
    if "id" not in msg:
        continue  # notifications, tools/cancel included: ignored
    if msg["method"] == "initialize":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {
            "protocolVersion": "0.1.0", "name": "late-host", "version": "1.0.0", "tools": TOOLS}})
    elif msg["method"] == "tools/execute":
        p = msg["params"]
        if p["toolName"] == "read_later":
            threading.Thread(target=read_later, args=(msg["id"], p.get("input") or {}), daemon=True).start()
        else:
            threading.Thread(target=wait, args=(msg["id"], (p.get("input") or {}).get("ms", 1000)), daemon=True).start()
    elif msg["method"] == "shutdown":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"status": "ok"}})
        sys.exit(0)
    else:
        send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "not found"}})
