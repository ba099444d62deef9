// Logging set-up with spdlog.
#include "io/log.hpp"

#include <sys/stat.h>

#include <memory>
#include <vector>

#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "policy/text.hpp"

namespace dhara::io {
namespace {

// The terminal's sink: a message quoting an extension (its error message, a tool name, its
// stderr's tail) reaches the terminal a prompt is on. Its escape sequences and line breaks are
// shown as '?', so it can neither clear the screen and draw a prompt of its own over a pending
// one nor start a line that looks like one (dhara's own messages are one line each).
class terminal_safe_sink final : public spdlog::sinks::sink {
 public:
  explicit terminal_safe_sink(spdlog::sink_ptr inner) : inner_(std::move(inner)) {}
  void log(const spdlog::details::log_msg& msg) override {
    const std::string payload = policy::terminal_safe({msg.payload.data(), msg.payload.size()});
    spdlog::details::log_msg safe = msg;
    safe.payload = payload;
    inner_->log(safe);
  }
  void flush() override { inner_->flush(); }
  void set_pattern(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override { inner_->set_formatter(std::move(formatter)); }

 private:
  spdlog::sink_ptr inner_;
};

}  // namespace

void init_logging(const std::string& dhara_home, bool verbose) {
  std::vector<spdlog::sink_ptr> sinks;
  auto err = std::make_shared<terminal_safe_sink>(std::make_shared<spdlog::sinks::stderr_sink_mt>());
  err->set_level(verbose ? spdlog::level::debug : spdlog::level::warn);
  err->set_pattern("dhara: %l: %v");
  sinks.push_back(err);
  std::string logs = dhara_home + "/logs";
  ::mkdir(dhara_home.c_str(), 0700);
  ::mkdir(logs.c_str(), 0700);
  std::string problem;
  try {
    auto file = std::make_shared<spdlog::sinks::rotating_file_sink_mt>(logs + "/dhara.log", 5 * 1024 * 1024, 3);
    file->set_level(verbose ? spdlog::level::debug : spdlog::level::info);
    file->set_pattern("%Y-%m-%dT%H:%M:%S.%e %l [%t] %v");
    sinks.push_back(file);
  } catch (const spdlog::spdlog_ex& e) {
    problem = e.what();
  }
  auto logger = std::make_shared<spdlog::logger>("dhara", sinks.begin(), sinks.end());
  logger->set_level(spdlog::level::debug);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
  if (!problem.empty()) spdlog::warn("cannot write {}/dhara.log ({}); logging to stderr only", logs, problem);
}

}  // namespace dhara::io
