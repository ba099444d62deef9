// Tests for io/jsonrpc.hpp: every message kind round-trips, every malformed form gets the
// right error, nesting and UTF-8 limits hold, and encoders never throw or break the line.
#include "io/jsonrpc.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <variant>
#include <vector>

using dhara::io::encode;
using dhara::io::encode_error;
using dhara::io::encode_execute_request;
using dhara::io::encode_notification;
using dhara::io::encode_request;
using dhara::io::encode_result;
using dhara::io::parse_rpc;
using dhara::io::rpc_error_code;
using dhara::io::refused_request_id;
using dhara::io::rpc_error_response;
using dhara::io::rpc_message;
using dhara::io::rpc_notification;
using dhara::io::rpc_request;
using dhara::io::rpc_response;
using dhara::policy::errc;
using json = nlohmann::json;
namespace rpc_error = dhara::io::rpc_error;

namespace {

// Printable ASCII only: error text may be logged and sent back to the peer.
bool printable_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) return false;
  return true;
}

// `open` copies of "[" (or "{\"a\":") and the matching closers.
std::string nested(std::size_t depth, bool objects) {
  std::string s;
  for (std::size_t i = 0; i < depth; ++i) s += objects ? "{\"a\":" : "[";
  s += "1";
  for (std::size_t i = 0; i < depth; ++i) s += objects ? "}" : "]";
  return s;
}

}  // namespace

TEST_CASE("every message kind round-trips through encode and parse_rpc", "[io][jsonrpc]") {
  const json big_unsigned = 18446744073709551615ull;
  const std::vector<rpc_message> table = {
      rpc_request{17, "tools/execute", {{"toolCallId", "c1"}, {"input", {{"path", "a.txt"}}}}},
      rpc_request{"abc", "host/fs/read", {{"path", "/tmp/x"}}},
      rpc_request{"", "m", json::array({1, "two", nullptr})},
      rpc_request{-5, "shutdown", nullptr},
      rpc_request{0, "initialize", json::object()},
      rpc_request{big_unsigned, "m", nullptr},
      rpc_request{-9223372036854775807LL - 1, "m", nullptr},
      rpc_notification{"tools/progress", {{"toolCallId", "c1"}, {"update", "50%"}}},
      rpc_notification{"tools/cancel", nullptr},
      rpc_notification{"tools/cancel", json::array()},
      rpc_response{17, {{"content", json::array({{{"type", "text"}, {"text", "hello"}}})}}},
      rpc_response{"s", nullptr},
      rpc_response{1, 3.25},
      rpc_response{2, "line one\nline two\r\u2028"},
      rpc_error_response{1, rpc_error::denied, "denied", {{"capability", "network:fetch"}, {"reason", "not approved"}}},
      rpc_error_response{nullptr, rpc_error::parse, "invalid JSON", nullptr},
      rpc_error_response{"x", rpc_error::crashed, "crashed", {{"exitCode", nullptr}, {"signal", "SIGKILL"}}},
      rpc_error_response{3, -2147483647 - 1, "", nullptr},
      rpc_error_response{4, 2147483647, "m", json::array()},
  };
  for (const auto& message : table) {
    const std::string line = encode(message);
    CAPTURE(line);
    CHECK(line.find('\n') == std::string::npos);
    CHECK(line.rfind("{\"jsonrpc\":\"2.0\"", 0) == 0);
    const auto back = parse_rpc(line);
    REQUIRE(back);
    CHECK(back->index() == message.index());
    CHECK(*back == message);
    CHECK(encode(*back) == line);
  }
}

TEST_CASE("encoders write the documented line, members in a fixed order", "[io][jsonrpc]") {
  CHECK(encode_request(1, "initialize", {{"protocolVersion", "0.1.0"}}) ==
        R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"0.1.0"}})");
  CHECK(encode_request("a", "shutdown", nullptr) == R"({"jsonrpc":"2.0","id":"a","method":"shutdown"})");
  CHECK(encode_notification("tools/cancel", {{"toolCallId", "c"}}) ==
        R"({"jsonrpc":"2.0","method":"tools/cancel","params":{"toolCallId":"c"}})");
  CHECK(encode_result(17, {{"status", "ok"}}) == R"({"jsonrpc":"2.0","id":17,"result":{"status":"ok"}})");
  CHECK(encode_result(17, nullptr) == R"({"jsonrpc":"2.0","id":17,"result":null})");
  CHECK(encode_error(nullptr, rpc_error::parse, "invalid JSON") ==
        R"({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"invalid JSON"}})");
  CHECK(encode_error(2, rpc_error::denied, "denied", {{"capability", "c"}}) ==
        R"({"jsonrpc":"2.0","id":2,"error":{"code":-32002,"message":"denied","data":{"capability":"c"}}})");
}

TEST_CASE("the tools/execute line is the request a params document would give", "[io][jsonrpc]") {
  auto by_document = [](std::int64_t id, const std::string& call_id, const std::string& tool, const json& input,
                        const std::string& cwd, const std::string& session) {
    return encode_request(id, "tools/execute",
                          {{"toolCallId", call_id}, {"toolName", tool}, {"input", input},
                           {"context", {{"cwd", cwd}, {"sessionId", session}}}});
  };
  const json input = {{"path", "src/a.ts"}, {"n", 3}, {"deep", {{"list", {1, "two", nullptr}}}}};
  // Plain text: byte for byte the same line.
  CHECK(encode_execute_request(42, "call-1", "read", input, "/home/u/proj", "s-1") ==
        by_document(42, "call-1", "read", input, "/home/u/proj", "s-1"));
  // Every JSON type in the input, escapes nlohmann writes short or as \u00XX, non-ASCII text,
  // the extreme integers and floats: the same bytes as dump() (the input is written without it).
  const json every_type = json::parse(R"({"a":[true,false,null,0,-1,9223372036854775807,-9223372036854775808,
      18446744073709551615,1.5,-0.0,1e300,2.2250738585072014e-308,[],{},[[{"x":[]}]]],
      "esc":"q\"b\\s\n\r\t\b\f\u0001\u001f\u007f /","text":"h\u00e9llo \u4e16\ud83d\ude00","":{"k":"v"}})");
  CHECK(encode_execute_request(1, "c", "t", every_type, "/", "") == by_document(1, "c", "t", every_type, "/", ""));
  CHECK(encode_execute_request(2, "c", "t", json::array({1, "x"}), "/", "") ==
        by_document(2, "c", "t", json::array({1, "x"}), "/", ""));
  CHECK(encode_execute_request(3, "c", "t", "plain", "/", "") == by_document(3, "c", "t", "plain", "/", ""));
  CHECK(encode_execute_request(7, "c", "t", json::object(), "/", "") ==
        R"({"jsonrpc":"2.0","id":7,"method":"tools/execute","params":{"context":{"cwd":"/","sessionId":""},"input":{},"toolCallId":"c","toolName":"t"}})");
  // Quotes, control characters, non-ASCII and invalid UTF-8: escaped differently, the same
  // message once parsed, and never a raw newline.
  const std::string odd = "q\"b\\s\n\t\x01 \xc3\xa9 \xe2\x80\xa8 bad\xff\xc0\x80";
  const std::string line = encode_execute_request(9, odd, odd, {{"text", odd}}, "/p/" + odd, odd);
  CHECK(line.find('\n') == std::string::npos);
  CHECK(json::parse(line) == json::parse(by_document(9, odd, odd, {{"text", odd}}, "/p/" + odd, odd)));
  const auto back = parse_rpc(line);
  REQUIRE(back);
  const auto& req = std::get<rpc_request>(*back);
  CHECK(req.method == "tools/execute");
  CHECK(req.params["toolName"] == "q\"b\\s\n\t\x01 \xc3\xa9 \xe2\x80\xa8 bad\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
}

TEST_CASE("encoders replace invalid UTF-8 and never emit a raw newline", "[io][jsonrpc]") {
  const std::string bad = "a\xff\xc0\x80z\n\r";
  const std::vector<std::string> lines = {
      encode_error(1, rpc_error::tool_error, bad, {{"stderrTail", bad}}),
      encode_notification(bad, {{bad, bad}}),
      encode_request(bad, "m", json::array({bad})),
      encode_result(1, bad),
  };
  for (const auto& line : lines) {
    CAPTURE(line);
    CHECK(line.find('\n') == std::string::npos);
    CHECK(line.find('\r') == std::string::npos);
    const auto back = parse_rpc(line);
    REQUIRE(back);
  }
  const auto err = parse_rpc(lines[0]);
  REQUIRE(err);
  CHECK(std::get<rpc_error_response>(*err).message == "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz\n\r");
}

TEST_CASE("lines from an extension decode to the right kind and fields", "[io][jsonrpc]") {
  SECTION("request with string id") {
    const auto m = parse_rpc(R"( {"jsonrpc":"2.0","id":"h1","method":"host/fs/read","params":{"path":"a"}} )");
    REQUIRE(m);
    const auto& r = std::get<rpc_request>(*m);
    CHECK(r.id == "h1");
    CHECK(r.method == "host/fs/read");
    CHECK(r.params == json{{"path", "a"}});
  }
  SECTION("notification keeps unknown members out") {
    const auto m = parse_rpc(R"({"method":"tools/progress","x-extra":1,"jsonrpc":"2.0","params":[1]})");
    REQUIRE(m);
    const auto& n = std::get<rpc_notification>(*m);
    CHECK(n.method == "tools/progress");
    CHECK(n.params == json::array({1}));
  }
  SECTION("response with null result") {
    const auto m = parse_rpc(R"({"jsonrpc":"2.0","id":7,"result":null})");
    REQUIRE(m);
    CHECK(std::get<rpc_response>(*m).id == 7);
    CHECK(std::get<rpc_response>(*m).result.is_null());
  }
  SECTION("error response with null id and data") {
    const auto m = parse_rpc(R"({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"bad","data":{"k":1}}})");
    REQUIRE(m);
    const auto& e = std::get<rpc_error_response>(*m);
    CHECK(e.id.is_null());
    CHECK(e.code == rpc_error::invalid_request);
    CHECK(e.message == "bad");
    CHECK(e.data == json{{"k", 1}});
  }
}

TEST_CASE("a result read without its envelope's object is the message the full parse makes", "[io][jsonrpc]") {
  // Plain results take the members-only path; the rest take the full parse. Both must give
  // what nlohmann's document of the line says, member for member.
  for (const std::string line : {
           R"({"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}]}})",
           R"({"result":[1,2.5,"x",null,true],"id":"s-1","jsonrpc":"2.0"})",
           R"({"id":-9,"jsonrpc":"2.0","result":{"b":1,"a":{"c":[]}}})",
           R"({"jsonrpc":"2.0","id":1,"result":{"k":1,"k":2}})",       // a name twice inside: the last
           R"({"jsonrpc":"2.0","id":1,"result":1,"result":2})",         // twice at the top: the full parse
           R"({"jsonrpc":"2.0","id":1,"result":3,"x-extra":true})",     // another member: the full parse
       }) {
    CAPTURE(line);
    const auto m = parse_rpc(line);
    REQUIRE(m);
    const auto& r = std::get<rpc_response>(*m);
    const json reference = json::parse(line);
    CHECK(r.id == reference["id"]);
    CHECK(r.id.type() == reference["id"].type());
    CHECK(r.result == reference["result"]);
  }
  // What the members-only path leaves to the full parse is refused as before.
  for (const std::string line : {R"({"jsonrpc":"2.1","id":1,"result":1})", R"({"jsonrpc":"2.0","id":null,"result":1})",
                                 R"({"jsonrpc":"2.0","id":1.5,"result":1})", R"({"jsonrpc":2,"id":1,"result":1})",
                                 R"({"jsonrpc":"2.0","result":1})", R"({"jsonrpc":"2.0","id":1,"result":1,"error":{}})"}) {
    CAPTURE(line);
    const auto m = parse_rpc(line);
    REQUIRE_FALSE(m);
    CHECK(m.err().code == errc::invalid_value);
  }
}

TEST_CASE("malformed lines give the right error code", "[io][jsonrpc]") {
  struct row {
    const char* line;
    errc code;
    const char* says;  // a piece of the message
  };
  const std::vector<row> table = {
      // not JSON: -32700
      {"", errc::parse_error, "invalid JSON"},
      {"{", errc::parse_error, "invalid JSON"},
      {"not json", errc::parse_error, "invalid JSON"},
      {R"({"jsonrpc":"2.0","method":"m"} {})", errc::parse_error, "invalid JSON"},
      {R"({"jsonrpc":"2.0","method":"m",})", errc::parse_error, "invalid JSON"},
      {R"({"jsonrpc":"2.0","method":"m"} // comment)", errc::parse_error, "invalid JSON"},
      {R"({"jsonrpc":"2.0","id":1e999,"method":"m"})", errc::parse_error, "invalid JSON"},
      {"{\"jsonrpc\":\"2.0\",\"method\":\"a\x01\"}", errc::parse_error, "invalid JSON"},
      // JSON but not JSON-RPC 2.0: -32600
      {"[]", errc::invalid_value, "batch"},
      {R"([{"jsonrpc":"2.0","method":"m"}])", errc::invalid_value, "batch"},
      {"42", errc::invalid_value, "must be an object, got number"},
      {"null", errc::invalid_value, "must be an object, got null"},
      {R"("str")", errc::invalid_value, "must be an object, got string"},
      {R"({"method":"m"})", errc::invalid_value, "missing \"jsonrpc\""},
      {R"({"jsonrpc":"1.0","method":"m"})", errc::invalid_value, "must be \"2.0\""},
      {R"({"jsonrpc":2.0,"method":"m"})", errc::invalid_value, "must be \"2.0\""},
      {R"({"jsonrpc":"2.0","method":5})", errc::invalid_value, "\"method\" must be a string, got number"},
      {R"({"jsonrpc":"2.0","method":null,"id":1})", errc::invalid_value, "\"method\" must be a string"},
      {R"({"jsonrpc":"2.0","method":""})", errc::invalid_value, "must not be empty"},
      {R"({"jsonrpc":"2.0","method":"m","params":"x"})", errc::invalid_value, "\"params\" must be an object or an array, got string"},
      {R"({"jsonrpc":"2.0","method":"m","params":null})", errc::invalid_value, "\"params\""},
      {R"({"jsonrpc":"2.0","method":"m","params":3})", errc::invalid_value, "\"params\""},
      {R"({"jsonrpc":"2.0","method":"m","id":null})", errc::invalid_value, "\"id\" of a request"},
      {R"({"jsonrpc":"2.0","method":"m","id":1.5})", errc::invalid_value, "\"id\" of a request"},
      {R"({"jsonrpc":"2.0","method":"m","id":true})", errc::invalid_value, "\"id\" of a request"},
      {R"({"jsonrpc":"2.0","method":"m","id":[1]})", errc::invalid_value, "\"id\" of a request"},
      {R"({"jsonrpc":"2.0","method":"m","id":1,"result":1})", errc::invalid_value, "both \"method\""},
      {R"({"jsonrpc":"2.0","method":"m","error":{}})", errc::invalid_value, "both \"method\""},
      {R"({"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}})", errc::invalid_value, "both \"result\" and \"error\""},
      {R"({"jsonrpc":"2.0","id":1})", errc::invalid_value, "needs \"method\""},
      {R"({"jsonrpc":"2.0"})", errc::invalid_value, "needs \"method\""},
      {R"({"jsonrpc":"2.0","result":1})", errc::invalid_value, "needs \"id\""},
      {R"({"jsonrpc":"2.0","id":null,"result":1})", errc::invalid_value, "\"id\" of a response"},
      {R"({"jsonrpc":"2.0","id":{},"result":1})", errc::invalid_value, "\"id\" of a response"},
      {R"({"jsonrpc":"2.0","error":{"code":1,"message":"m"}})", errc::invalid_value, "needs \"id\""},
      {R"({"jsonrpc":"2.0","id":false,"error":{"code":1,"message":"m"}})", errc::invalid_value, "\"id\" must be"},
      {R"({"jsonrpc":"2.0","id":1,"error":"boom"})", errc::invalid_value, "\"error\" must be an object"},
      {R"({"jsonrpc":"2.0","id":1,"error":{"message":"m"}})", errc::invalid_value, "\"error.code\""},
      {R"({"jsonrpc":"2.0","id":1,"error":{"code":"1","message":"m"}})", errc::invalid_value, "\"error.code\""},
      {R"({"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"m"}})", errc::invalid_value, "\"error.code\""},
      {R"({"jsonrpc":"2.0","id":1,"error":{"code":2147483648,"message":"m"}})", errc::invalid_value, "out of range"},
      {R"({"jsonrpc":"2.0","id":1,"error":{"code":-2147483649,"message":"m"}})", errc::invalid_value, "out of range"},
      {R"({"jsonrpc":"2.0","id":1,"error":{"code":1}})", errc::invalid_value, "\"error.message\""},
      {R"({"jsonrpc":"2.0","id":1,"error":{"code":1,"message":null}})", errc::invalid_value, "\"error.message\""},
  };
  for (const auto& r : table) {
    CAPTURE(r.line);
    const auto m = parse_rpc(r.line);
    REQUIRE_FALSE(m);
    CHECK(m.err().code == r.code);
    CHECK_THAT(m.err().message, Catch::Contains(r.says));
    CHECK(printable_ascii(m.err().message));
    CHECK(rpc_error_code(m.err()) == (r.code == errc::parse_error ? rpc_error::parse : rpc_error::invalid_request));
  }
}

TEST_CASE("a refused request is answered with its id where the id can be read", "[io][jsonrpc]") {
  // JSON-RPC 2.0 answers null only when the id cannot be detected; a client waiting for id 6
  // must hear why its request was refused.
  const std::vector<std::pair<std::string, nlohmann::json>> table = {
      {R"({"jsonrpc":"2.0","id":6,"method":"m","params":"x"})", 6},
      {R"({"id":"a-7","method":"m"})", "a-7"},
      {R"({"jsonrpc":"1.0","id":-3,"method":"m"})", -3},
      {R"({"jsonrpc":"2.0","id":8,"method":5})", 8},
      {R"({"jsonrpc":"2.0","id":1})", 1},
      // Not readable as an id, or not a request: null.
      {R"({"jsonrpc":"2.0","id":1.5,"method":"m"})", nullptr},
      {R"({"jsonrpc":"2.0","id":[8],"method":"m"})", nullptr},
      {R"({"jsonrpc":"2.0","id":null,"method":"m"})", nullptr},
      {R"({"jsonrpc":"2.0","method":"m","params":3})", nullptr},
      {R"({"jsonrpc":"2.0","id":9,"result":1,"error":{}})", nullptr},
      {R"({"jsonrpc":"2.0","id":9,"method":"m","error":{}})", nullptr},
      {R"([{"jsonrpc":"2.0","id":10,"method":"m"}])", nullptr},
      {R"({"jsonrpc":"2.0","id":11,"method":"m",})", nullptr},
      {"not json", nullptr},
  };
  for (const auto& [line, id] : table) {
    CAPTURE(line);
    REQUIRE_FALSE(parse_rpc(line));
    CHECK(refused_request_id(line) == id);
  }
}

TEST_CASE("nesting: 256 levels accepted, 257 rejected before the value is built", "[io][jsonrpc]") {
  for (bool objects : {false, true}) {
    CAPTURE(objects);
    // The message object itself is level 1, so params may add 255 more.
    const auto line = [&](std::size_t params_depth) {
      return R"({"jsonrpc":"2.0","method":"m","params":)" + nested(params_depth, objects) + "}";
    };
    const auto ok = parse_rpc(line(255));
    REQUIRE(ok);
    CHECK(std::get<rpc_notification>(*ok).params.is_structured());

    const auto deep = parse_rpc(line(256));
    REQUIRE_FALSE(deep);
    CHECK(deep.err().code == errc::parse_error);
    CHECK_THAT(deep.err().message, Catch::Contains("deeper than 256"));

    // A bare value of exactly 256 levels passes the depth check (and is then a batch or
    // not a message), 257 does not.
    const auto bare_ok = parse_rpc(nested(256, objects));
    REQUIRE_FALSE(bare_ok);
    CHECK(bare_ok.err().code == errc::invalid_value);
    const auto bare_deep = parse_rpc(nested(257, objects));
    REQUIRE_FALSE(bare_deep);
    CHECK(bare_deep.err().code == errc::parse_error);
  }
  SECTION("a million levels do not exhaust the stack") {
    const auto m = parse_rpc(std::string(1000000, '['));
    REQUIRE_FALSE(m);
    CHECK(m.err().code == errc::parse_error);
    CHECK_THAT(m.err().message, Catch::Contains("deeper than 256"));
  }
  SECTION("brackets inside strings do not count") {
    const auto m = parse_rpc(R"({"jsonrpc":"2.0","method":")" + std::string(1000, '[') + "\"}");
    CHECK(m);
  }
}

TEST_CASE("invalid UTF-8 inside a string is a parse error, reported printably", "[io][jsonrpc]") {
  const std::vector<std::string> lines = {
      "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"path\":\"\xff\"}}",
      "{\"jsonrpc\":\"2.0\",\"method\":\"\xc0\x80\"}",          // overlong NUL
      "{\"jsonrpc\":\"2.0\",\"method\":\"\xed\xa0\x80\"}",      // surrogate
      "{\"jsonrpc\":\"2.0\",\"method\":\"\xf4\x90\x80\x80\"}",  // above U+10FFFF
      "{\"jsonrpc\":\"2.0\",\"method\":\"abc\xe2\x82\"}",       // truncated
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"" + std::string(100000, 'x') + "\x80\"}",
  };
  for (const auto& l : lines) {
    const auto m = parse_rpc(l);
    REQUIRE_FALSE(m);
    CHECK(m.err().code == errc::parse_error);
    CHECK(printable_ascii(m.err().message));
    CHECK(m.err().message.size() < 300);  // the 100 000-byte token is not echoed
  }
}

TEST_CASE("string and integer ids are kept with their type", "[io][jsonrpc]") {
  struct row {
    const char* line;
    json id;
  };
  const std::vector<row> table = {
      {R"({"jsonrpc":"2.0","id":1,"method":"m"})", 1},
      {R"({"jsonrpc":"2.0","id":-1,"method":"m"})", -1},
      {R"({"jsonrpc":"2.0","id":"1","method":"m"})", "1"},
      {R"({"jsonrpc":"2.0","id":"","method":"m"})", ""},
      {R"({"jsonrpc":"2.0","id":18446744073709551615,"method":"m"})", 18446744073709551615ull},
  };
  for (const auto& r : table) {
    CAPTURE(r.line);
    const auto m = parse_rpc(r.line);
    REQUIRE(m);
    const auto& id = std::get<rpc_request>(*m).id;
    CHECK(id == r.id);
    CHECK(id.is_string() == r.id.is_string());
  }
}
