#!/usr/bin/env python3
# hang-ignore-term: test extension for the kill chain — ignores SIGTERM, so only SIGKILL ends it;
# tool `hang` never replies and stops reading stdin. Tool `ok` answers; `late` answers after
# input.ms milliseconds.
import json
import signal
import sys
import time

signal.signal(signal.SIGTERM, signal.SIG_IGN)  # before anything is read: no window where TERM kills it

TOOLS = [
    {"name": "hang", "description": "Never reply",
     "parameters": {"type": "object", "properties": {}}, "capabilities": []},
    {"name": "ok", "description": "Return the text 'ok'",
     "parameters": {"type": "object", "properties": {}}, "capabilities": []},
    {"name": "late", "description": "Return the text 'late' after input.ms milliseconds",
     "parameters": {"type": "object", "properties": {"ms": {"type": "integer"}}}, "capabilities": []},
]


def send(msg):
    sys.stdout.write(json.dumps(msg, separators=(",", ":")) + "\n")
    sys.stdout.flush()


for raw in sys.stdin.buffer:
    msg = json.loads(raw)
    if "id" not in msg or "method" not in msg:
        continue  # notifications (tools/cancel included) and responses: no reply
    id_, method, params = msg["id"], msg["method"], msg.get("params") or {}
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id_, "result": {
            "protocolVersion": "0.1.0", "name": "hang-ignore-term", "version": "1.0.0", "tools": TOOLS}})
    elif method == "tools/execute" and params.get("toolName") == "hang":
        while True:
            time.sleep(3600)
    elif method == "tools/execute" and params.get("toolName") == "late":
        time.sleep((params.get("input") or {}).get("ms", 0) / 1000)
        send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": "late"}]}})
    elif method == "tools/execute" and params.get("toolName") == "ok":
        send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": "ok"}]}})
    elif method == "shutdown":
        send({"jsonrpc": "2.0", "id": id_, "result": {"status": "ok"}})
        sys.exit(0)
    else:
        send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": f"not found: {method}"}})
