// Tests for io/line_framer.hpp: lines split across reads, many per read, CRLF, empty lines,
// the maxLineBytes boundary and violations found before the newline arrives.
#include "io/line_framer.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

using dhara::io::line_framer;

namespace {

struct outcome {
  std::vector<std::string> lines;
  bool ok = true;
};

// Feeds `chunks` in order, collecting lines; stops at the first false like a reader would.
outcome run(line_framer& framer, const std::vector<std::string>& chunks) {
  outcome out;
  for (const auto& chunk : chunks) {
    out.ok = framer.feed(chunk, [&](std::string_view line) { out.lines.emplace_back(line); });
    if (!out.ok) break;
  }
  return out;
}

// Splits `text` into pieces of `size` bytes (the last one shorter).
std::vector<std::string> pieces(const std::string& text, std::size_t size) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < text.size(); i += size) out.push_back(text.substr(i, size));
  return out;
}

constexpr std::size_t eight_mib = 8 * 1024 * 1024;

}  // namespace

TEST_CASE("lines come out whole however the stream is split", "[io][framing]") {
  const std::string stream =
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}\n"
      "second line\r\n"
      "\n"
      "\r\n"
      "third\n"
      "x\n";
  const std::vector<std::string> expected = {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}",
                                             "second line", "third", "x"};
  for (std::size_t size : {1u, 2u, 3u, 5u, 7u, 13u, 40u, 41u, 42u, 1000u}) {
    CAPTURE(size);
    line_framer framer(64);
    const auto out = run(framer, pieces(stream, size));
    CHECK(out.ok);
    CHECK(out.lines == expected);
    CHECK(framer.buffered() == 0);
    CHECK_FALSE(framer.violated());
  }
}

TEST_CASE("framing table: chunks in, lines out", "[io][framing]") {
  struct row {
    const char* name;
    std::vector<std::string> chunks;
    std::vector<std::string> lines;
    std::size_t buffered;
  };
  const std::vector<row> table = {
      {"many messages in one read", {"a\nb\nc\n"}, {"a", "b", "c"}, 0},
      {"CRLF stripped", {"a\r\nb\r\n"}, {"a", "b"}, 0},
      {"CR split from its LF", {"abc\r", "\n"}, {"abc"}, 0},
      {"only one trailing CR stripped", {"a\r\r\n"}, {"a\r"}, 0},
      {"CR inside a line kept", {"a\rb\n"}, {"a\rb"}, 0},
      {"empty lines skipped", {"\n\n\r\n\na\n\n"}, {"a"}, 0},
      {"partial line held back", {"ab", "cd"}, {}, 4},
      {"partial after complete", {"x\nab"}, {"x"}, 2},
      {"newline completes the held line", {"ab", "c\nd"}, {"abc"}, 1},
      {"empty chunks are harmless", {"", "a", "", "\n", ""}, {"a"}, 0},
      {"no newline in a stream of empties", {"", ""}, {}, 0},
      {"NUL bytes are line content", {std::string("a\0b\n", 4)}, {std::string("a\0b", 3)}, 0},
  };
  for (const auto& r : table) {
    CAPTURE(r.name);
    line_framer framer(16);
    const auto out = run(framer, r.chunks);
    CHECK(out.ok);
    CHECK(out.lines == r.lines);
    CHECK(framer.buffered() == r.buffered);
  }
}

TEST_CASE("a line of exactly max bytes passes, one more is a violation", "[io][framing]") {
  struct row {
    const char* name;
    std::string stream;
    bool ok;
  };
  const std::size_t max = 8;
  const std::vector<row> table = {
      {"max with LF", std::string(max, 'x') + "\n", true},
      {"max with CRLF", std::string(max, 'x') + "\r\n", true},
      {"max+1 with LF", std::string(max + 1, 'x') + "\n", false},
      {"max+1 with CRLF", std::string(max + 1, 'x') + "\r\n", false},
      {"max ending in CR then LF", std::string(max - 1, 'x') + "\r\r\n", true},
      {"max+1 ending in two CRs", std::string(max, 'x') + "\r\r\n", false},
  };
  for (std::size_t size : {1u, 3u, 100u}) {
    for (const auto& r : table) {
      CAPTURE(r.name, size);
      line_framer framer(max);
      const auto out = run(framer, pieces(r.stream, size));
      CHECK(out.ok == r.ok);
      CHECK(framer.violated() == !r.ok);
      CHECK(out.lines.size() == (r.ok ? 1u : 0u));
      if (!r.ok) CHECK_FALSE(framer.violation().empty());
    }
  }
}

TEST_CASE("the 8 MiB limit: 8388608 bytes allowed, 8388609 a violation", "[io][framing]") {
  const std::string exact(eight_mib, 'a');

  SECTION("exact size in one read, then another line") {
    line_framer framer(eight_mib);
    std::vector<std::size_t> sizes;
    const bool ok = framer.feed(exact + "\nnext\n", [&](std::string_view l) { sizes.push_back(l.size()); });
    CHECK(ok);
    CHECK(sizes == std::vector<std::size_t>{eight_mib, 4});
  }
  SECTION("exact size in 64 KiB reads with CRLF") {
    line_framer framer(eight_mib);
    std::vector<std::size_t> sizes;
    bool ok = true;
    for (const auto& p : pieces(exact + "\r\n", 64 * 1024))
      ok = ok && framer.feed(p, [&](std::string_view l) { sizes.push_back(l.size()); });
    CHECK(ok);
    CHECK(sizes == std::vector<std::size_t>{eight_mib});
  }
  SECTION("one byte more in one read") {
    line_framer framer(eight_mib);
    int calls = 0;
    CHECK_FALSE(framer.feed(exact + "a\n", [&](std::string_view) { ++calls; }));
    CHECK(framer.violated());
    CHECK(calls == 0);
  }
  SECTION("one byte more, found before the newline arrives") {
    line_framer framer(eight_mib);
    int calls = 0;
    const auto count = [&](std::string_view) { ++calls; };
    CHECK(framer.feed(exact, count));
    CHECK(framer.buffered() == eight_mib);
    CHECK_FALSE(framer.feed("a", count));  // no newline yet: already too long
    CHECK(framer.violated());
    CHECK(framer.buffered() == 0);
    CHECK(calls == 0);
  }
}

TEST_CASE("a violation is found before the newline and never over-buffers", "[io][framing]") {
  line_framer framer(10);
  std::size_t most = 0;
  bool ok = true;
  for (int i = 0; i < 100 && ok; ++i) {
    ok = framer.feed("x", [](std::string_view) {});
    most = std::max(most, framer.buffered());
  }
  CHECK_FALSE(ok);
  CHECK(framer.violated());
  CHECK(most == 10);

  SECTION("a pending CR is the one byte allowed over the limit") {
    line_framer f(10);
    CHECK(f.feed(std::string(10, 'x') + "\r", [](std::string_view) {}));
    CHECK(f.buffered() == 11);
    CHECK_FALSE(f.feed("y", [](std::string_view) {}));
    CHECK(f.violated());
  }
}

TEST_CASE("after a violation the framer refuses input until reset", "[io][framing]") {
  line_framer framer(4);
  std::vector<std::string> lines;
  const auto collect = [&](std::string_view l) { lines.emplace_back(l); };
  CHECK_FALSE(framer.feed("ok\ntoolong\nlater\n", collect));
  CHECK(lines == std::vector<std::string>{"ok"});
  CHECK_FALSE(framer.feed("more\n", collect));
  CHECK(lines.size() == 1);
  framer.reset();
  CHECK_FALSE(framer.violated());
  CHECK(framer.violation().empty());
  CHECK(framer.feed("more\n", collect));
  CHECK(lines == std::vector<std::string>{"ok", "more"});
}

TEST_CASE("a consumer returning false stops the feed without a violation", "[io][framing]") {
  line_framer framer(64);
  std::vector<std::string> lines;
  const auto first_only = [&](std::string_view l) {
    lines.emplace_back(l);
    return false;
  };
  CHECK_FALSE(framer.feed("a\nb\nc\n", first_only));
  CHECK(lines == std::vector<std::string>{"a"});
  CHECK_FALSE(framer.violated());
  CHECK_FALSE(framer.feed("d\n", first_only));
  CHECK(lines.size() == 1);

  line_framer keep(64);
  lines.clear();
  CHECK(keep.feed("a\nb\n", [&](std::string_view l) {
    lines.emplace_back(l);
    return true;
  }));
  CHECK(lines == std::vector<std::string>{"a", "b"});
}

TEST_CASE("finish delivers a last line without a newline", "[io][framing]") {
  struct row {
    const char* name;
    std::string stream;
    std::vector<std::string> lines;
  };
  const std::vector<row> table = {
      {"unterminated last line", "a\nb", {"a", "b"}},
      {"unterminated with CR", "a\nb\r", {"a", "b"}},
      {"terminated", "a\n", {"a"}},
      {"only a CR", "\r", {}},
      {"nothing", "", {}},
  };
  for (const auto& r : table) {
    CAPTURE(r.name);
    line_framer framer(8);
    std::vector<std::string> lines;
    const auto collect = [&](std::string_view l) { lines.emplace_back(l); };
    CHECK(framer.feed(r.stream, collect));
    CHECK(framer.finish(collect));
    CHECK(lines == r.lines);
    CHECK(framer.buffered() == 0);
  }
}

TEST_CASE("lines inside one read are handed out without copying", "[io][framing]") {
  const std::string chunk = "first\nsecond\nthird";
  line_framer framer(64);
  std::vector<const char*> starts;
  CHECK(framer.feed(chunk, [&](std::string_view l) { starts.push_back(l.data()); }));
  CHECK(starts == std::vector<const char*>{chunk.data(), chunk.data() + 6});
  CHECK(framer.buffered() == 5);
}

TEST_CASE("a consumer that throws does not glue its line to the next", "[io][framing]") {
  line_framer framer(64);
  CHECK(framer.feed("ab", [](std::string_view) {}));
  CHECK_THROWS(framer.feed("c\n", [](std::string_view) { throw std::runtime_error("consumer failed"); }));
  std::vector<std::string> lines;
  CHECK(framer.feed("d\n", [&](std::string_view l) { lines.emplace_back(l); }));
  CHECK(lines == std::vector<std::string>{"d"});
}
