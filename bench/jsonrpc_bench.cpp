// The extension protocol's hot path (DESIGN §5): framing the bytes an extension writes into
// lines (io::line_framer), decoding a tools/execute result line (io::parse_rpc) and encoding a
// tools/execute request (io::encode_execute_request, as the supervisor writes it).
// Each next to a baseline measured in the same run: a bare memchr line split, nlohmann's
// parse of the same bytes, the params-document encoding send_call used before, nlohmann's dump of a
// ready document and memcpy of the same bytes.
// Prints the ratios at the end.
//
// io/jsonrpc.hpp has no id-only scan today (the supervisor parses each result in full), so
// the parse figures are full parses. BM_Baseline_NlohmannParse is nlohmann's own parse of
// the same bytes; dhara's parse (policy::parse_json_fast, with nlohmann deciding whatever it
// does not accept) adds the validation and message building on top of its own parse.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/jsonrpc.hpp"
#include "io/line_framer.hpp"
#include "bench/ratio_reporter.hpp"

using json = nlohmann::json;

namespace {

// What echo-native answers to a dhara bench call (the common small reply).
const std::string echo_result =
    R"({"jsonrpc":"2.0","id":4242,"result":{"content":[{"type":"text","text":"hello from dhara bench"}]}})";

// What a file-reading tool answers: `bytes` of source text with escaped newlines and quotes
// (~2 KiB: a typical read; 256 KiB: a large file).
std::string read_result(std::size_t bytes = 2048) {
  std::string text;
  for (int i = 0; text.size() < bytes; ++i)
    text += "export function handler" + std::to_string(i) + "(req: Request) {\\n  return \\\"ok\\\";\\n}\\n";
  return R"({"jsonrpc":"2.0","id":4243,"result":{"content":[{"type":"text","text":")" + text +
         R"("}],"metadata":{"path":"/home/u/proj/src/auth/login.ts","bytes":)" + std::to_string(bytes) + "}}}";
}

const std::string& result_line(std::int64_t which) {
  static const std::string big = read_result();
  static const std::string huge = read_result(256 * 1024);
  return which == 0 ? echo_result : which == 1 ? big : huge;
}

// 1 MiB of result lines as they arrive from a pipe, read back in 64 KiB chunks (so lines are
// split across chunks, as they are in real reads).
struct stream {
  std::string bytes;
  std::size_t lines = 0;
  explicit stream(const std::string& line) {
    while (bytes.size() < (1u << 20)) {
      bytes += line;
      bytes += '\n';
      ++lines;
    }
  }
};

const stream& stream_of(std::int64_t which) {
  static const stream small(result_line(0)), big(result_line(1));
  return which == 0 ? small : big;
}

constexpr std::size_t read_chunk = 64 * 1024;

void BM_Frame_LineFramer(benchmark::State& state) {
  const stream& s = stream_of(state.range(0));
  dhara::io::line_framer framer(8 * 1024 * 1024);
  std::size_t seen = 0;
  for (auto _ : state) {
    for (std::size_t off = 0; off < s.bytes.size(); off += read_chunk)
      framer.feed(std::string_view(s.bytes).substr(off, read_chunk), [&](std::string_view line) {
        seen += line.size();
      });
  }
  benchmark::DoNotOptimize(seen);
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(s.lines));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(s.bytes.size()));
}
BENCHMARK(BM_Frame_LineFramer)->Arg(0)->Arg(1);

// Baseline: memchr for each newline, a partial line carried over in a string.
void BM_Baseline_MemchrFrame(benchmark::State& state) {
  const stream& s = stream_of(state.range(0));
  std::string carry;
  std::size_t seen = 0;
  for (auto _ : state) {
    for (std::size_t off = 0; off < s.bytes.size(); off += read_chunk) {
      const char* p = s.bytes.data() + off;
      const char* end = p + std::min(read_chunk, s.bytes.size() - off);
      while (p < end) {
        const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
        if (!nl) {
          carry.append(p, end);
          break;
        }
        if (carry.empty()) {
          seen += static_cast<std::size_t>(nl - p);
        } else {
          carry.append(p, nl);
          seen += carry.size();
          carry.clear();
        }
        p = nl + 1;
      }
    }
  }
  benchmark::DoNotOptimize(seen);
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(s.lines));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(s.bytes.size()));
}
BENCHMARK(BM_Baseline_MemchrFrame)->Arg(0)->Arg(1);

// The supervisor's decode of each result line: depth-limited, UTF-8-checked parse into a
// typed rpc_message (a full parse: there is no id-only path).
void BM_Parse_ToolsExecuteResult(benchmark::State& state) {
  const std::string& line = result_line(state.range(0));
  std::size_t ok = 0;
  for (auto _ : state) {
    auto m = dhara::io::parse_rpc(line);
    ok += m.has_value();
    benchmark::DoNotOptimize(m);
  }
  if (ok != static_cast<std::size_t>(state.iterations())) state.SkipWithError("parse_rpc refused the line");
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(line.size()));
}
BENCHMARK(BM_Parse_ToolsExecuteResult)->Arg(0)->Arg(1)->Arg(2);

// Baseline: nlohmann's own parse of the same bytes into a DOM, nothing checked.
void BM_Baseline_NlohmannParse(benchmark::State& state) {
  const std::string& line = result_line(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(json::parse(line, nullptr, false));
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(line.size()));
}
BENCHMARK(BM_Baseline_NlohmannParse)->Arg(0)->Arg(1)->Arg(2);

// Baseline: the least an id-only forwarder would do: find "id": and read the integer.
void BM_Baseline_ScanId(benchmark::State& state) {
  const std::string& line = result_line(state.range(0));
  for (auto _ : state) {
    std::int64_t id = -1;
    if (auto at = line.find(R"("id":)"); at != std::string::npos) {
      id = 0;
      for (std::size_t i = at + 5; i < line.size() && line[i] >= '0' && line[i] <= '9'; ++i) id = id * 10 + (line[i] - '0');
    }
    benchmark::DoNotOptimize(id);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Baseline_ScanId)->Arg(0)->Arg(1)->Arg(2);

// The request dhara bench sends, with the input every call carries.
const json& call_input() {
  static const json in = {{"text", "hello from dhara bench"}, {"path", "/home/u/proj/bench.txt"}};
  return in;
}

// As extension_supervisor's send_call: the line written directly, only the input dumped.
void BM_Encode_ToolsExecuteRequest(benchmark::State& state) {
  std::int64_t id = 0;
  std::size_t bytes = 0;
  for (auto _ : state) {
    std::string line = dhara::io::encode_execute_request(++id, "call-7f3a9c-000123", "echo", call_input(),
                                                         "/home/u/proj", "sess-7f3a9c");
    bytes += line.size();
    benchmark::DoNotOptimize(line);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
}
BENCHMARK(BM_Encode_ToolsExecuteRequest);

// Baseline: how send_call wrote it before, a params document built per call, then one line.
void BM_Baseline_EncodeThroughDocument(benchmark::State& state) {
  std::int64_t id = 0;
  for (auto _ : state) {
    json params = {{"toolCallId", "call-7f3a9c-000123"},
                   {"toolName", "echo"},
                   {"input", call_input()},
                   {"context", {{"cwd", "/home/u/proj"}, {"sessionId", "sess-7f3a9c"}}}};
    std::string line = dhara::io::encode_request(++id, "tools/execute", params);
    benchmark::DoNotOptimize(line);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Baseline_EncodeThroughDocument);

json ready_request() {
  return {{"jsonrpc", "2.0"},
          {"id", 4242},
          {"method", "tools/execute"},
          {"params",
           {{"toolCallId", "call-7f3a9c-000123"},
            {"toolName", "echo"},
            {"input", call_input()},
            {"context", {{"cwd", "/home/u/proj"}, {"sessionId", "sess-7f3a9c"}}}}}};
}

// Baseline: nlohmann's dump of the same request, the document already built.
void BM_Baseline_NlohmannDump(benchmark::State& state) {
  const json doc = ready_request();
  for (auto _ : state) benchmark::DoNotOptimize(doc.dump());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Baseline_NlohmannDump);

// Baseline: the floor, a copy of the finished line's bytes into a fresh string.
void BM_Baseline_MemcpyRequest(benchmark::State& state) {
  const std::string line = ready_request().dump();
  for (auto _ : state) {
    std::string copy(line.size(), '\0');
    std::memcpy(copy.data(), line.data(), line.size());
    benchmark::DoNotOptimize(copy);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Baseline_MemcpyRequest);

class report : public dhara::bench::ratio_reporter {
 protected:
  void summary() override {
    auto ns = [&](const std::string& k) { return ns_per_item(k); };
    std::printf("\n== JSON-RPC summary (ratios measured in this run; dhara time / baseline time) ==\n");
    const char* sizes[] = {"echo result (~100 B)", "file-read result (~2 KiB)", "large file-read result (~256 KiB)"};
    for (int a = 0; a < 3; ++a) {
      const std::string arg = "/" + std::to_string(a);
      double frame = ns("BM_Frame_LineFramer" + arg), memchr = ns("BM_Baseline_MemchrFrame" + arg);
      double parse = ns("BM_Parse_ToolsExecuteResult" + arg), nl = ns("BM_Baseline_NlohmannParse" + arg);
      double scan = ns("BM_Baseline_ScanId" + arg);
      std::printf("%s:\n", sizes[a]);
      if (frame > 0 && memchr > 0)
        std::printf("  framing  %8.1f ns/line   memchr %8.1f ns   %.2fx\n", frame, memchr, frame / memchr);
      if (parse > 0 && nl > 0)
        std::printf("  parse    %8.1f ns/line   nlohmann::parse %8.1f ns   %.2fx   (id-only scan %.1f ns: %.0fx less)\n",
                    parse, nl, parse / nl, scan, scan > 0 ? parse / scan : 0.0);
    }
    double enc = ns("BM_Encode_ToolsExecuteRequest"), dump = ns("BM_Baseline_NlohmannDump"),
           copy = ns("BM_Baseline_MemcpyRequest"), via_doc = ns("BM_Baseline_EncodeThroughDocument");
    if (enc > 0 && dump > 0 && copy > 0 && via_doc > 0)
      std::printf("tools/execute request: encode %.1f ns (encode_execute_request); through a params document %.1f ns "
                  "(%.2fx); nlohmann dump of a ready document %.1f ns (%.2fx); memcpy %.1f ns (%.1fx)\n",
                  enc, via_doc, enc / via_doc, dump, enc / dump, copy, enc / copy);
  }
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  report reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
