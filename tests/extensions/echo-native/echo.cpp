// echo-native: the benchmark extension — answers `echo` as fast as a pipe allows.
// A one-pass scanner picks out the top-level id/method and input.text; the escaped text is copied verbatim.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace {

struct Request {
    std::string_view id, method, tool, text;  // id: raw JSON; the others: string contents, still escaped
    bool has_text = false;
};

// Index just past the closing quote of the string starting at s[i] == '"' (or s.size()).
size_t skip_string(std::string_view s, size_t i) {
    for (++i; i < s.size(); ++i) {
        if (s[i] == '\\') ++i;
        else if (s[i] == '"') return i + 1;
    }
    return s.size();
}

size_t skip_ws(std::string_view s, size_t i) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) ++i;
    return i;
}

// Only what dhara sends matters; anything unrecognized leaves fields empty.
Request scan(std::string_view s) {
    Request r;
    int depth = 0;
    for (size_t i = 0; i < s.size();) {
        char c = s[i];
        if (c == '"') {
            size_t end = skip_string(s, i);
            size_t v = skip_ws(s, end);
            if (v >= s.size() || s[v] != ':') { i = end; continue; }  // a value, not a key
            std::string_view key = s.substr(i + 1, end - i - 2);
            v = skip_ws(s, v + 1);
            bool is_str = v < s.size() && s[v] == '"';
            size_t vend = is_str ? skip_string(s, v) : v;
            if (!is_str) while (vend < s.size() && !strchr(",}] \t\r", s[vend])) ++vend;
            std::string_view inner = is_str && vend - v >= 2 ? s.substr(v + 1, vend - v - 2) : std::string_view{};
            if (depth == 1 && key == "id") r.id = s.substr(v, vend - v);
            else if (depth == 1 && key == "method") r.method = inner;
            else if (depth == 2 && key == "toolName") r.tool = inner;
            else if (depth == 3 && key == "text" && is_str && !r.has_text) { r.text = inner; r.has_text = true; }
            i = is_str ? vend : v;  // objects/arrays in the value are walked by this loop
        } else {
            if (c == '{' || c == '[') ++depth;
            else if (c == '}' || c == ']') --depth;
            ++i;
        }
    }
    return r;
}

constexpr std::string_view kTools =
    R"([{"name":"echo","description":"Return input.text as text content",)"
    R"("parameters":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]},)"
    R"("capabilities":[]}])";
// With --manifest-capabilities the tool has no `capabilities` key, so it requires every
// capability its manifest declares: each call is then a checked, audited call (fault tests).
constexpr std::string_view kToolsChecked =
    R"([{"name":"echo","description":"Return input.text as text content",)"
    R"("parameters":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}])";
bool g_checked = false;

void head(std::string& out, std::string_view id) {
    out += R"({"jsonrpc":"2.0","id":)";
    out += id;
}

bool write_all(const std::string& out) {
    for (size_t off = 0; off < out.size();) {
        ssize_t n = ::write(1, out.data() + off, out.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        off += size_t(n);
    }
    return true;
}

// Appends the reply to one line; returns false when the line was `shutdown`.
bool handle(std::string_view line, std::string& out) {
    Request r = scan(line);
    if (r.id.empty() || r.method.empty()) return true;  // notification, response or junk: no reply
    head(out, r.id);
    if (r.method == "tools/execute" && r.tool == "echo") {
        out += R"(,"result":{"content":[{"type":"text","text":")";
        out += r.text;
        out += "\"}]}}\n";
    } else if (r.method == "tools/execute") {
        out += R"(,"error":{"code":-32601,"message":"unknown tool"}})" "\n";
    } else if (r.method == "initialize") {
        out += R"(,"result":{"protocolVersion":"0.1.0","name":"echo-native","version":"1.0.0","tools":)";
        out += g_checked ? kToolsChecked : kTools;
        out += "}}\n";
    } else if (r.method == "shutdown") {
        out += R"(,"result":{"status":"ok"}})" "\n";
        return false;
    } else {
        out += R"(,"error":{"code":-32601,"message":"method not found"}})" "\n";
    }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    g_checked = argc > 1 && std::string_view(argv[1]) == "--manifest-capabilities";
    std::string buf(1 << 20, '\0');
    std::string out;
    size_t have = 0;  // bytes in buf; buf[0..have) holds at most one partial line between reads
    for (;;) {
        if (have == buf.size()) buf.resize(buf.size() * 2);  // a line longer than the buffer
        ssize_t n = ::read(0, buf.data() + have, buf.size() - have);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return 0;  // EOF: the core went away
        size_t scanned = have;
        have += size_t(n);
        size_t start = 0;
        bool running = true;
        // Every complete line in this read is answered before one write: many requests, one syscall.
        while (running) {
            const void* nl = memchr(buf.data() + scanned, '\n', have - scanned);
            if (!nl) break;
            size_t end = size_t(static_cast<const char*>(nl) - buf.data());
            running = handle(std::string_view(buf.data() + start, end - start), out);
            start = scanned = end + 1;
        }
        if (!out.empty() && !write_all(out)) return 1;
        out.clear();
        if (!running) return 0;
        memmove(buf.data(), buf.data() + start, have - start);
        have -= start;
    }
}
