#!/usr/bin/env python3
# close-stdout: test extension for a half-dead process — tool `close` closes stdout (fd 1) without
# replying and keeps running: it goes on reading (and ignoring) stdin and does not exit at EOF;
# SIGTERM ends it. Tool `close-stdin` closes stdin (fd 0), then answers and keeps running without
# reading anything. Tool `ok` answers normally.
import json
import os
import sys
import time

TOOLS = [
    {"name": "close", "description": "Close stdout without replying, keep running",
     "parameters": {"type": "object", "properties": {}}, "capabilities": []},
    {"name": "close-stdin", "description": "Close stdin, answer, keep running",
     "parameters": {"type": "object", "properties": {}}, "capabilities": []},
    {"name": "ok", "description": "Return the text 'ok'",
     "parameters": {"type": "object", "properties": {}}, "capabilities": []},
]


def send(msg):
    sys.stdout.write(json.dumps(msg, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def linger():
    for _ in sys.stdin.buffer:
        pass  # read and ignore, so a writer to our stdin never blocks
    while True:
        time.sleep(3600)


for raw in sys.stdin.buffer:
    msg = json.loads(raw)
    if "id" not in msg or "method" not in msg:
        continue  # notifications and responses: no reply
    id_, method, params = msg["id"], msg["method"], msg.get("params") or {}
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id_, "result": {
            "protocolVersion": "0.1.0", "name": "close-stdout", "version": "1.0.0", "tools": TOOLS}})
    elif method == "tools/execute" and params.get("toolName") == "close":
        sys.stdout.flush()
        os.close(1)
        linger()
    elif method == "tools/execute" and params.get("toolName") == "close-stdin":
        os.close(0)  # first: every later write to it fails (EPIPE)
        send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": "stdin closed"}]}})
        while True:
            time.sleep(3600)
    elif method == "tools/execute" and params.get("toolName") == "ok":
        send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": "ok"}]}})
    elif method == "shutdown":
        send({"jsonrpc": "2.0", "id": id_, "result": {"status": "ok"}})
        sys.exit(0)
    else:
        send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": f"not found: {method}"}})
