#!/usr/bin/env python3
"""file-stats: an example dhara extension that reads files through the host API.

Tool `file_stats` {paths: [...]} counts lines, words and bytes of each file. It never opens a
file itself: it asks dhara with `host/fs/read` {path}, and dhara checks every path against the
approved capabilities and the path rules (allowedPaths minus deniedPaths, after symlinks),
audits the decision, and opens the file beneath the allowed folder.

The point of this example is the denial. A path outside the project, or under a denied entry
such as `~/.ssh/` or `~/.aws/`, comes back as a JSON-RPC error instead of a result:

  {"jsonrpc":"2.0","id":"file-stats-2","error":{"code":-32002,"message":"…",
   "data":{"capability":"filesystem:read","reason":"…"}}}

The tool reports it for that file and goes on with the others: one denied path does not fail
the whole call (so `dhara run` still counts the call as ok).

The protocol (summed up in ../README.md): newline-delimited JSON-RPC 2.0 on stdin/stdout;
logs go to stderr. `../web-tools/main.py` explains the wire code in more detail.
"""
import json
import sys

NAME, VERSION = "file-stats", "1.0.0"

TOOLS = [
    {
        "name": "file_stats",
        "description": "Count lines, words and bytes of text files (paths relative to the project)",
        # The call itself needs filesystem:read approved; each path is then checked by dhara
        # when we ask for it (the gate checks only inputs named path/file/filePath/dir/cwd).
        "capabilities": ["filesystem:read"],
        "parameters": {
            "type": "object",
            "properties": {"paths": {"type": "array", "items": {"type": "string"}}},
            "required": ["paths"],
        },
    },
]

DENIED = -32002  # dhara's "capability denied" error code


class HostError(Exception):
    def __init__(self, error):
        super().__init__(error.get("message", "host error"))
        self.code = error.get("code")
        self.data = error.get("data") or {}


class Wire:
    """The JSON-RPC connection to dhara."""

    def __init__(self):
        self.lines = iter(sys.stdin.buffer)
        self.queued = []
        self.next_id = 0

    def send(self, msg):
        msg["jsonrpc"] = "2.0"
        sys.stdout.write(json.dumps(msg, separators=(",", ":")) + "\n")
        sys.stdout.flush()

    def messages(self):
        while True:
            if self.queued:
                yield self.queued.pop(0)
                continue
            line = next(self.lines, None)
            if line is None:
                return
            try:
                yield json.loads(line)
            except ValueError:
                self.send({"id": None, "error": {"code": -32700, "message": "parse error"}})

    def host(self, method, params):
        """One host API request; returns its result or raises HostError."""
        self.next_id += 1
        request_id = f"file-stats-{self.next_id}"
        self.send({"id": request_id, "method": method, "params": params})
        for line in self.lines:
            msg = json.loads(line)
            if msg.get("id") == request_id and "method" not in msg:
                if "error" in msg:
                    raise HostError(msg["error"])
                return msg.get("result") or {}
            self.queued.append(msg)
        sys.exit(0)


def stats_of(wire, path):
    """One file: (line for the agent, metadata entry)."""
    try:
        answer = wire.host("host/fs/read", {"path": path})
    except HostError as e:
        if e.code == DENIED:
            reason = e.data.get("reason", str(e))
            return f"{path}: denied by dhara ({e.data.get('capability')}): {reason}", \
                   {"path": path, "denied": True, "reason": reason}
        return f"{path}: error: {e}", {"path": path, "error": str(e)}
    content = answer.get("content", "")
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    entry = {"path": path, "lines": lines, "words": len(content.split()), "bytes": answer.get("size", len(content))}
    return f"{path}: {entry['lines']} lines, {entry['words']} words, {entry['bytes']} bytes", entry


def run_tool(wire, name, args):
    if name != "file_stats":
        raise LookupError(name)
    paths = args.get("paths")
    if isinstance(paths, str):
        paths = [paths]
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) for p in paths):
        return {"content": [{"type": "text", "text": "file_stats needs paths: a list of strings"}], "isError": True}
    lines, files = zip(*(stats_of(wire, p) for p in paths))
    result = {"content": [{"type": "text", "text": "\n".join(lines)}], "metadata": {"files": list(files)}}
    if all("lines" not in f for f in files):
        result["isError"] = True  # nothing could be read: the call failed
    return result


def main():
    wire = Wire()
    for msg in wire.messages():
        if "method" not in msg or "id" not in msg:
            continue  # notifications and stray responses: no answer
        id_, method, params = msg["id"], msg["method"], msg.get("params") or {}
        if method == "initialize":
            wire.send({"id": id_, "result": {"protocolVersion": "0.1.0", "name": NAME,
                                             "version": VERSION, "tools": TOOLS}})
        elif method == "tools/execute":
            try:
                wire.send({"id": id_, "result": run_tool(wire, params.get("toolName"), params.get("input") or {})})
            except LookupError:
                wire.send({"id": id_, "error": {"code": -32601,
                                                "message": f"unknown tool: {params.get('toolName')}"}})
            except Exception as e:
                wire.send({"id": id_, "error": {"code": -32001, "message": f"file_stats failed: {e}"}})
        elif method == "shutdown":
            wire.send({"id": id_, "result": {"status": "ok"}})
            return
        else:
            wire.send({"id": id_, "error": {"code": -32601, "message": f"method not found: {method}"}})


if __name__ == "__main__":
    main()
