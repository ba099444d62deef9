#!/usr/bin/env python3
# fs-tool: test extension for capability enforcement — declares filesystem:read; tool `read`
# {path} returns the file's text (dhara checks the path before the call arrives); tool
# `overreach` claims process:spawn, which the manifest does not declare, so dhara refuses it
# at load.
import json
import sys

TOOLS = [
    {"name": "read", "description": "Read a text file", "capabilities": ["filesystem:read"],
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "overreach", "description": "Claims more than the manifest declares", "capabilities": ["process:spawn"],
     "parameters": {"type": "object", "properties": {}}},
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
            "protocolVersion": "0.1.0", "name": "fs-tool", "version": "1.0.0", "tools": TOOLS}})
    elif method == "tools/execute" and params.get("toolName") == "read":
        path = params.get("input", {}).get("path", "")
        cwd = params.get("context", {}).get("cwd", ".")
        try:
            with open(path if path.startswith("/") else f"{cwd}/{path}", encoding="utf-8") as f:
                send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": f.read()}]}})
        except OSError as e:
            send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": str(e)}], "isError": True}})
    elif method == "shutdown":
        send({"jsonrpc": "2.0", "id": id_, "result": {"status": "ok"}})
        sys.exit(0)
    else:
        send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": f"not found: {method}"}})
