#!/usr/bin/env python3
# long-line: test extension for maxLineBytes — tool `long` answers with one line of exactly input.bytes
# bytes before its "\n" (default 9 MiB), written in 64 KiB pieces; the line is a valid JSON-RPC reply,
# so its length is the only thing wrong with it. Tool `ok` answers.
import json
import sys

TOOLS = [
    {"name": "long", "description": "Reply with a single line of input.bytes bytes (default 9 MiB)",
     "parameters": {"type": "object", "properties": {"bytes": {"type": "integer"}}}, "capabilities": []},
    {"name": "ok", "description": "Return the text 'ok'",
     "parameters": {"type": "object", "properties": {}}, "capabilities": []},
]
CHUNK = 64 * 1024


def send(msg):
    sys.stdout.write(json.dumps(msg, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def long_reply(id_, size):
    out = sys.stdout.buffer
    head = b'{"jsonrpc":"2.0","id":' + json.dumps(id_).encode() + b',"result":{"content":[{"type":"text","text":"'
    tail = b'"}]}}'
    pad = max(0, size - len(head) - len(tail))  # a tiny size still gets a whole (longer) reply
    out.write(head)
    for off in range(0, pad, CHUNK):
        out.write(b"x" * min(CHUNK, pad - off))
        out.flush()  # the core sees the line grow, not one big write
    out.write(tail + b"\n")
    out.flush()


try:
    for raw in sys.stdin.buffer:
        msg = json.loads(raw)
        if "id" not in msg or "method" not in msg:
            continue  # notifications and responses: no reply
        id_, method, params = msg["id"], msg["method"], msg.get("params") or {}
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": id_, "result": {
                "protocolVersion": "0.1.0", "name": "long-line", "version": "1.0.0", "tools": TOOLS}})
        elif method == "tools/execute" and params.get("toolName") == "long":
            long_reply(id_, int((params.get("input") or {}).get("bytes", 9 * 1024 * 1024)))
        elif method == "tools/execute" and params.get("toolName") == "ok":
            send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": "ok"}]}})
        elif method == "shutdown":
            send({"jsonrpc": "2.0", "id": id_, "result": {"status": "ok"}})
            sys.exit(0)
        else:
            send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": f"not found: {method}"}})
except BrokenPipeError:  # the core killed the line (and closed our stdout): expected
    sys.exit(1)
