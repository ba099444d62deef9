#!/usr/bin/env python3
"""web-tools: an example dhara extension in Python — one tool, `fetch` {url}.

The extension never opens a socket itself. It asks dhara to do the fetch (the host API
request `host/net/fetch`), so the broker checks the url against what the user approved and
the domains the manifest lists (api.example.com), refuses hosts that resolve to private or
loopback addresses, connects to the very address it checked, and audits the request. An
extension that opened its own sockets would get none of that: only the OS sandbox's limits.

How a call travels:
  1. dhara's tool-call gate checks the call's `url` input (the tool requires network:fetch):
     a domain the manifest does not list is denied before this process hears of the call.
  2. dhara sends `tools/execute`; we send `host/net/fetch` and wait for its answer. dhara
     checks that request again (the url could differ from the input) and audits it.
  3. A denial comes back as error -32002 {capability, reason}; we turn it into a tool result
     with `isError: true`, so the agent reads why.

The protocol (summed up in ../README.md): newline-delimited JSON-RPC 2.0 on stdin/stdout,
one object a line; logs go to stderr. Copy this file to start your own extension: change
TOOLS and run_tool.
"""
import json
import sys

NAME, VERSION = "web-tools", "1.0.0"

# What dhara shows the agent. `capabilities` is what one call of the tool needs: dhara refuses
# the call unless the user approved these (and the manifest declares them).
TOOLS = [
    {
        "name": "fetch",
        "description": "Fetch a URL from the example API (api.example.com) and return its body",
        "capabilities": ["network:fetch"],
        "parameters": {
            "type": "object",
            "properties": {"url": {"type": "string", "description": "https://api.example.com/…"}},
            "required": ["url"],
        },
    },
]

MAX_BODY_CHARS = 4000  # keep results small: they go back into an agent's context


class HostError(Exception):
    """dhara answered a host request with an error (-32002 = capability denied)."""

    def __init__(self, error):
        super().__init__(error.get("message", "host error"))
        self.code = error.get("code")
        self.data = error.get("data") or {}


class Wire:
    """The JSON-RPC connection to dhara: requests we send, and messages we receive."""

    def __init__(self):
        self.lines = iter(sys.stdin.buffer)
        self.queued = []  # messages that arrived while we waited for a host answer
        self.next_id = 0

    def send(self, msg):
        msg["jsonrpc"] = "2.0"
        sys.stdout.write(json.dumps(msg, separators=(",", ":")) + "\n")
        sys.stdout.flush()  # one line, at once: dhara reads line by line

    def messages(self):
        while True:
            if self.queued:
                yield self.queued.pop(0)
                continue
            line = next(self.lines, None)
            if line is None:
                return  # dhara closed our stdin: time to go
            try:
                yield json.loads(line)
            except ValueError:
                self.send({"id": None, "error": {"code": -32700, "message": "parse error"}})

    def host(self, method, params):
        """Sends a host API request to dhara and returns its result (raises HostError)."""
        self.next_id += 1
        request_id = f"web-tools-{self.next_id}"  # our ids: never confused with dhara's
        self.send({"id": request_id, "method": method, "params": params})
        for line in self.lines:
            msg = json.loads(line)
            if msg.get("id") == request_id and "method" not in msg:
                if "error" in msg:
                    raise HostError(msg["error"])
                return msg.get("result") or {}
            self.queued.append(msg)  # anything else waits until this call is done
        sys.exit(0)  # stdin closed while waiting: dhara is shutting us down


def text(s, is_error=False):
    result = {"content": [{"type": "text", "text": s}]}
    if is_error:
        result["isError"] = True
    return result


def run_tool(wire, name, args):
    if name != "fetch":
        raise LookupError(name)
    url = args.get("url")
    if not isinstance(url, str) or not url:
        return text("fetch needs a url", is_error=True)
    try:
        answer = wire.host("host/net/fetch", {"url": url, "method": "GET"})
    except HostError as e:
        if e.code == -32002:  # dhara said no: tell the agent exactly why
            return text(f"dhara denied {e.data.get('capability', 'this request')}: "
                        f"{e.data.get('reason', e)}", is_error=True)
        return text(f"could not fetch {url}: {e}", is_error=True)
    body = answer.get("body", "")
    cut = answer.get("truncated") or len(body) > MAX_BODY_CHARS
    return text(f"HTTP {answer.get('status')} from {url}\n{body[:MAX_BODY_CHARS]}"
                + ("\n[body truncated]" if cut else ""))


def main():
    wire = Wire()
    for msg in wire.messages():
        if "method" not in msg or "id" not in msg:
            continue  # notifications (tools/cancel) and stray responses need no answer
        id_, method, params = msg["id"], msg["method"], msg.get("params") or {}
        if method == "initialize":
            wire.send({"id": id_, "result": {"protocolVersion": "0.1.0", "name": NAME,
                                             "version": VERSION, "tools": TOOLS}})
        elif method == "tools/execute":
            try:
                result = run_tool(wire, params.get("toolName"), params.get("input") or {})
                wire.send({"id": id_, "result": result})
            except LookupError:
                wire.send({"id": id_, "error": {"code": -32601,
                                                "message": f"unknown tool: {params.get('toolName')}"}})
            except Exception as e:  # a bug here must not kill the extension: report it
                wire.send({"id": id_, "error": {"code": -32001, "message": f"fetch failed: {e}"}})
        elif method == "shutdown":
            wire.send({"id": id_, "result": {"status": "ok"}})
            return
        else:
            wire.send({"id": id_, "error": {"code": -32601, "message": f"method not found: {method}"}})


if __name__ == "__main__":
    main()
