#!/usr/bin/env python3
# fork-child: test extension for orphaned grandchildren — tool `orphan` starts `sleep 30`
# sharing its stdout and stderr, then exits with code 5 without replying, so the pipe stays
# open after the extension is gone; tool `ok` answers normally.
import json
import os
import subprocess
import sys

TOOLS = [
    {"name": "orphan", "description": "Leave a grandchild holding stdout, then exit 5",
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
            "protocolVersion": "0.1.0", "name": "fork-child", "version": "1.0.0", "tools": TOOLS}})
    elif method == "tools/execute" and params.get("toolName") == "orphan":
        subprocess.Popen(["sleep", "30"])  # inherits stdout: the pipe outlives this process
        os._exit(5)
    elif method == "tools/execute" and params.get("toolName") == "ok":
        send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": "ok"}]}})
    elif method == "shutdown":
        send({"jsonrpc": "2.0", "id": id_, "result": {"status": "ok"}})
        sys.exit(0)
    else:
        send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": f"not found: {method}"}})
