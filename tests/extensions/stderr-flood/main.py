#!/usr/bin/env python3
# stderr-flood: test extension for stderr log capping — tool `flood` writes input.mb (default 20) MiB
# of text lines to stderr, then returns a normal result. Tool `ok` answers.
import json
import sys

TOOLS = [
    {"name": "flood", "description": "Write input.mb MiB to stderr, then return",
     "parameters": {"type": "object", "properties": {"mb": {"type": "number"}}}, "capabilities": []},
    {"name": "ok", "description": "Return the text 'ok'",
     "parameters": {"type": "object", "properties": {}}, "capabilities": []},
]
LINE = b"stderr-flood: " + b"e" * 49 + b"\n"  # 64 bytes


def send(msg):
    sys.stdout.write(json.dumps(msg, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def flood(id_, mb):
    total = int(mb * 1024 * 1024)
    chunk = LINE * 1024  # 64 KiB
    err = sys.stderr.buffer
    for off in range(0, total, len(chunk)):
        err.write(chunk[:total - off])
    err.flush()
    send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": f"wrote {total} bytes"}]}})


for raw in sys.stdin.buffer:
    msg = json.loads(raw)
    if "id" not in msg or "method" not in msg:
        continue  # notifications and responses: no reply
    id_, method, params = msg["id"], msg["method"], msg.get("params") or {}
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id_, "result": {
            "protocolVersion": "0.1.0", "name": "stderr-flood", "version": "1.0.0", "tools": TOOLS}})
    elif method == "tools/execute" and params.get("toolName") == "flood":
        flood(id_, float((params.get("input") or {}).get("mb", 20)))
    elif method == "tools/execute" and params.get("toolName") == "ok":
        send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": "ok"}]}})
    elif method == "shutdown":
        send({"jsonrpc": "2.0", "id": id_, "result": {"status": "ok"}})
        sys.exit(0)
    else:
        send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": f"not found: {method}"}})
