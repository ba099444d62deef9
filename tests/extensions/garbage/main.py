#!/usr/bin/env python3
# garbage: test extension for protocol violations — tool `garbage` writes a non-JSON line to stdout
# instead of a reply (input.text, default "this is not json"). Tool `ok` answers.
import json
import sys

TOOLS = [
    {"name": "garbage", "description": "Write a non-JSON line instead of a reply",
     "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}, "capabilities": []},
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
            "protocolVersion": "0.1.0", "name": "garbage", "version": "1.0.0", "tools": TOOLS}})
    elif method == "tools/execute" and params.get("toolName") == "garbage":
        sys.stdout.write((params.get("input") or {}).get("text", "this is not json") + "\n")
        sys.stdout.flush()
    elif method == "tools/execute" and params.get("toolName") == "ok":
        send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": "ok"}]}})
    elif method == "shutdown":
        send({"jsonrpc": "2.0", "id": id_, "result": {"status": "ok"}})
        sys.exit(0)
    else:
        send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": f"not found: {method}"}})
