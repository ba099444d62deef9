#!/usr/bin/env python3
# crash: test extension for crash handling — tool `crash` exits with code 3 mid-call, without replying;
# tool `ok` answers normally, so tests can check that the restarted extension works.
import json
import os
import sys

TOOLS = [
    {"name": "crash", "description": "Exit with code 3 without replying",
     "parameters": {"type": "object", "properties": {}}, "capabilities": []},
    {"name": "ok", "description": "Return the text 'ok'",
     "parameters": {"type": "object", "properties": {}}, "capabilities": []},
]


def send(msg):
    sys.stdout.write(json.dumps(msg, separators=(",", ":")) + "\n")
    sys.stdout.flush()


for raw in sys.stdin.buffer:
    msg = json.loads(raw)
    if "id" not in msg or "method" not in msg:
        continue  # notifications and responses: no reply
    id_, method, params = msg["id"], msg["method"], msg.get("params") or {}
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id_, "result": {
            "protocolVersion": "0.1.0", "name": "crash", "version": "1.0.0", "tools": TOOLS}})
    elif method == "tools/execute" and params.get("toolName") == "crash":
        sys.stderr.write("crash: exiting with code 3 as asked\n")
        sys.stderr.flush()
        os._exit(3)
    elif method == "tools/execute" and params.get("toolName") == "ok":
        send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": "ok"}]}})
    elif method == "shutdown":
        send({"jsonrpc": "2.0", "id": id_, "result": {"status": "ok"}})
        sys.exit(0)
    else:
        send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": f"not found: {method}"}})
