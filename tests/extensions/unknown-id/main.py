#!/usr/bin/env python3
# unknown-id: test extension for response matching — every tools/execute is answered three times:
# first with a wrong id (id + 1000, or id + "-wrong" for a string id), then the right reply, then a duplicate.
import json
import sys

TOOLS = [
    {"name": "echo", "description": "Return input.text (default 'ok'), wrapped in wrong-id and duplicate replies",
     "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}, "capabilities": []},
]


def send(msg):
    sys.stdout.write(json.dumps(msg, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def text(s):
    return {"content": [{"type": "text", "text": s}]}


for raw in sys.stdin.buffer:
    msg = json.loads(raw)
    if "id" not in msg or "method" not in msg:
        continue  # notifications and responses: no reply
    id_, method, params = msg["id"], msg["method"], msg.get("params") or {}
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id_, "result": {
            "protocolVersion": "0.1.0", "name": "unknown-id", "version": "1.0.0", "tools": TOOLS}})
    elif method == "tools/execute":
        wrong = id_ + 1000 if isinstance(id_, int) and not isinstance(id_, bool) else f"{id_}-wrong"
        right = {"jsonrpc": "2.0", "id": id_, "result": text((params.get("input") or {}).get("text", "ok"))}
        send({"jsonrpc": "2.0", "id": wrong, "result": text("reply with the wrong id")})
        send(right)
        send(right)  # the duplicate
    elif method == "shutdown":
        send({"jsonrpc": "2.0", "id": id_, "result": {"status": "ok"}})
        sys.exit(0)
    else:
        send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": f"not found: {method}"}})
