#!/usr/bin/env python3
# echo-py: the well-behaved Python test extension (echo, sleep, progress, env, fail).
# Reads requests in order on the main thread; `sleep` runs on a thread so cancels still get read.
import json
import os
import sys
import threading

NAME, VERSION = "echo-py", "1.0.0"


def schema(props, required=()):
    return {"type": "object", "properties": props, "required": list(required)}


TOOLS = [
    {"name": "echo", "description": "Return input.text as text content",
     "parameters": schema({"text": {"type": "string"}}, ["text"]), "capabilities": []},
    {"name": "sleep", "description": "Wait input.ms milliseconds; tools/cancel answers it with -32004",
     "parameters": schema({"ms": {"type": "number"}}, ["ms"]), "capabilities": []},
    {"name": "progress", "description": "Send input.count tools/progress notifications, then return",
     "parameters": schema({"count": {"type": "integer"}}), "capabilities": []},
    {"name": "env", "description": "Return the JSON encoding of os.environ[input.name], or null",
     "parameters": schema({"name": {"type": "string"}}, ["name"]), "capabilities": []},
    {"name": "fail", "description": "Return a result with isError: true",
     "parameters": schema({"message": {"type": "string"}}), "capabilities": []},
]

out_lock = threading.Lock()
sleepers = {}  # toolCallId -> threading.Event, set by tools/cancel
sleepers_lock = threading.Lock()


def send(msg):
    line = json.dumps(msg, separators=(",", ":")) + "\n"
    with out_lock:  # the sleep threads write too: one whole line at a time
        sys.stdout.write(line)
        sys.stdout.flush()


def reply(id_, result):
    send({"jsonrpc": "2.0", "id": id_, "result": result})


def error(id_, code, message):
    send({"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}})


def text(s, is_error=False):
    result = {"content": [{"type": "text", "text": s}]}
    if is_error:
        result["isError"] = True
    return result


def sleep_call(id_, call_id, ms, cancelled):
    try:
        if cancelled.wait(ms / 1000.0):
            error(id_, -32004, "cancelled")
        else:
            reply(id_, text(f"slept {ms} ms"))
    finally:
        with sleepers_lock:
            sleepers.pop(call_id, None)


def execute(id_, params):
    tool = params.get("toolName")
    inp = params.get("input") or {}
    call_id = params.get("toolCallId")
    if tool == "echo":
        t = inp.get("text", "")
        reply(id_, text(t if isinstance(t, str) else json.dumps(t)))
    elif tool == "sleep":
        ms = inp.get("ms", 1000)
        if not isinstance(ms, (int, float)) or isinstance(ms, bool) or ms < 0:
            return error(id_, -32602, "input.ms must be a non-negative number")
        ev = threading.Event()
        with sleepers_lock:
            sleepers[call_id] = ev
        threading.Thread(target=sleep_call, args=(id_, call_id, ms, ev), daemon=True).start()
    elif tool == "progress":
        count = int(inp.get("count", 3))
        for i in range(1, count + 1):
            send({"jsonrpc": "2.0", "method": "tools/progress", "params": {
                "toolCallId": call_id,
                "update": {"message": f"step {i} of {count}", "progress": i, "total": count}}})
        reply(id_, text(f"sent {count} progress updates"))
    elif tool == "env":
        name = inp.get("name", "")
        value = os.environ.get(name) if isinstance(name, str) else None
        result = text(json.dumps(value))
        result["metadata"] = {"name": name, "value": value}
        reply(id_, result)
    elif tool == "fail":
        reply(id_, text(inp.get("message", "tool failed"), is_error=True))
    else:
        error(id_, -32601, f"unknown tool: {tool}")


def cancel(params):
    call_id = params.get("toolCallId") if isinstance(params, dict) else None
    with sleepers_lock:
        events = list(sleepers.values()) if call_id is None else [sleepers.get(call_id)]
    for ev in events:
        if ev is not None:
            ev.set()


def main():
    for raw in sys.stdin.buffer:
        try:
            msg = json.loads(raw)
        except ValueError:
            error(None, -32700, "parse error")
            continue
        if not isinstance(msg, dict) or "method" not in msg:
            continue  # a response or junk: nothing to answer
        method, params = msg["method"], msg.get("params") or {}
        if "id" not in msg:  # notification: never answered
            if method == "tools/cancel":
                cancel(params)
            continue
        id_ = msg["id"]
        try:
            if method == "initialize":
                reply(id_, {"protocolVersion": "0.1.0", "name": NAME, "version": VERSION,
                            "tools": TOOLS})
            elif method == "tools/execute":
                execute(id_, params)
            elif method == "shutdown":
                reply(id_, {"status": "ok"})
                os._exit(0)  # sleep threads may still be waiting: don't join them
            else:
                error(id_, -32601, f"method not found: {method}")
        except (AttributeError, TypeError, ValueError) as e:
            error(id_, -32602, f"invalid params: {e}")
    os._exit(0)  # EOF on stdin: the core went away


if __name__ == "__main__":
    main()
