#!/usr/bin/env python3
# host-client: test extension for the host API — tool `host` {method, params} sends that host
# request to dhara in the middle of the call and returns dhara's whole answer as JSON text;
# with {requests: [{method, params}, …]} it sends them all at once (and with stall: true
# never reads its input again).
import json
import sys
import time

TOOLS = [
    {"name": "host", "description": "Make one host API request and return the answer",
     "capabilities": [],
     "parameters": {"type": "object", "properties": {"method": {"type": "string"}, "params": {"type": "object"}}}},
]


def send(msg):
    sys.stdout.write(json.dumps(msg, separators=(",", ":")) + "\n")
    sys.stdout.flush()


lines = iter(sys.stdin.buffer)
next_host_id = 0
for raw in lines:
    msg = json.loads(raw)
    if "id" not in msg or "method" not in msg:
        continue  # notifications and responses: no reply
    id_, method, params = msg["id"], msg["method"], msg.get("params") or {}
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id_, "result": {
            "protocolVersion": "0.1.0", "name": "host-client", "version": "1.0.0", "tools": TOOLS}})
    elif method == "tools/execute" and params.get("toolName") == "host" and "requests" in params.get("input", {}):
        # Several requests sent at once; the answer says of each what came back (an error, the
        # length of a read's content, or another result whole).
        pending = {}
        for r in params["input"]["requests"]:
            next_host_id += 1
            hid = f"h{next_host_id}"
            pending[hid] = len(pending)
            send({"jsonrpc": "2.0", "id": hid, "method": r.get("method"), "params": r.get("params", {})})
        if params["input"].get("stall"):  # asks, then never reads its input again
            time.sleep(3600)
        answers = [None] * len(pending)
        for line in lines:
            m = json.loads(line)
            if m.get("id") in pending and ("result" in m or "error" in m):
                result = m.get("result", {})
                answers[pending.pop(m["id"])] = (
                    {"error": m["error"]} if "error" in m else
                    {"contentLength": len(result["content"])} if "content" in result else result)
                if not pending:
                    break
        send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": json.dumps(answers)}]}})
    elif method == "tools/execute" and params.get("toolName") == "host":
        inp = params.get("input", {})
        next_host_id += 1
        hid = f"h{next_host_id}"
        send({"jsonrpc": "2.0", "id": hid, "method": inp.get("method"), "params": inp.get("params", {})})
        answer = None
        for line in lines:  # wait for dhara's answer to our request
            m = json.loads(line)
            if m.get("id") == hid and ("result" in m or "error" in m):
                answer = m
                break
        send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": json.dumps(answer)}]}})
    elif method == "shutdown":
        send({"jsonrpc": "2.0", "id": id_, "result": {"status": "ok"}})
        sys.exit(0)
    else:
        send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": f"not found: {method}"}})
