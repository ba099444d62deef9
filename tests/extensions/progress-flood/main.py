#!/usr/bin/env python3
# progress-flood: test extension for backpressure — tool `flood` sends input.count (default 100000)
# tools/progress notifications as fast as it can, then its result. Tool `ok` answers.
import json
import sys

TOOLS = [
    {"name": "flood", "description": "Send input.count progress notifications, then return",
     "parameters": {"type": "object", "properties": {"count": {"type": "integer"}}}, "capabilities": []},
    {"name": "ok", "description": "Return the text 'ok'",
     "parameters": {"type": "object", "properties": {}}, "capabilities": []},
]


def send(msg):
    sys.stdout.write(json.dumps(msg, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def flood(id_, call_id, count):
    prefix = '{"jsonrpc":"2.0","method":"tools/progress","params":{"toolCallId":' + json.dumps(call_id)
    batch = []
    for i in range(1, count + 1):
        batch.append(f'{prefix},"update":{{"progress":{i},"total":{count}}}}}}}\n')
        if len(batch) == 1000:  # big writes: the pipe, not Python, is the limit
            sys.stdout.write("".join(batch))
            batch.clear()
    sys.stdout.write("".join(batch))
    send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": f"sent {count}"}]}})


try:
    for raw in sys.stdin.buffer:
        msg = json.loads(raw)
        if "id" not in msg or "method" not in msg:
            continue  # notifications and responses: no reply
        id_, method, params = msg["id"], msg["method"], msg.get("params") or {}
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": id_, "result": {
                "protocolVersion": "0.1.0", "name": "progress-flood", "version": "1.0.0", "tools": TOOLS}})
        elif method == "tools/execute" and params.get("toolName") == "flood":
            flood(id_, params.get("toolCallId"), int((params.get("input") or {}).get("count", 100000)))
        elif method == "tools/execute" and params.get("toolName") == "ok":
            send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": "ok"}]}})
        elif method == "shutdown":
            send({"jsonrpc": "2.0", "id": id_, "result": {"status": "ok"}})
            sys.exit(0)
        else:
            send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": f"not found: {method}"}})
except BrokenPipeError:  # the core killed us mid-flood: expected
    sys.exit(1)
