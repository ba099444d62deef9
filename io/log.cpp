// Logging set-up with spdlog.
#include "io/log.hpp"

#include <sys/stat.h>

#include <memory>
#include <vector>

#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace dhara::io {

void init_logging(const std::string& dhara_home, bool verbose) {
  std::vector<spdlog::sink_ptr> sinks;
  auto err = std::make_shared<spdlog::sinks::stderr_sink_mt>();
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
