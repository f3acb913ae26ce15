#include "gpusched/cli/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "gpusched/common/log.h"
#include "gpusched/common/log_fields.h"

namespace gpusched::cli {
namespace {

// A JSON string of any bytes: invalid UTF-8 (a pod name is checked, a message may quote anything) is replaced,
// never thrown about.
std::string JsonString(std::string_view s) {
  return nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

spdlog::level::level_enum ToSpdlog(common::LogLevel level) {
  switch (level) {
    case common::LogLevel::kDebug:
      return spdlog::level::debug;
    case common::LogLevel::kInfo:
      return spdlog::level::info;
    case common::LogLevel::kWarn:
      return spdlog::level::warn;
    case common::LogLevel::kError:
      return spdlog::level::err;
  }
  return spdlog::level::info;
}

}  // namespace

void AddLogFlags(CLI::App& cmd, LogFlags& flags) {
  cmd.add_option("--v", flags.v, "Log verbosity as kube components take it: 0-3 info, 4 and above debug")
      ->check(CLI::Range(0, 10));
  cmd.add_option("--log-format", flags.format, "text (timestamp, level, message) or json (one object per line)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
}

void SetUpLogging(const LogFlags& flags, bool verbose, std::string_view component) {
  auto logger =
      std::make_shared<spdlog::logger>(std::string(component), std::make_shared<spdlog::sinks::stderr_sink_mt>());
  const bool json = flags.format == "json";
  // %v is the message; in JSON mode it arrives already encoded as a JSON string (quotes and escapes).
  logger->set_pattern(json ? R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","component":"%n","msg":%v})"
                           : "%Y-%m-%dT%H:%M:%S.%fZ %l %n: %v",
                      spdlog::pattern_time_type::utc);
  logger->set_level(spdlog::level::trace);  // common::Log filters by level before the sink
  logger->flush_on(spdlog::level::trace);   // a daemon's log is read as it happens (and kill -9 loses nothing)
  common::SetLogSink([logger, json](common::LogLevel level, std::string_view message) {
    if (json) {
      logger->log(ToSpdlog(level), "{}", JsonString(message));
    } else {
      logger->log(ToSpdlog(level), "{}", message);
    }
  });
  common::SetStructuredLogSink(
      [logger, json](common::LogLevel level, std::string_view message, std::span<const common::LogField> fields) {
        if (!json) {
          logger->log(ToSpdlog(level), "{}", common::FormatLogFields(message, fields));
          return;
        }
        // The pattern closes the object after %v: the message, then each field as a key of its own.
        std::string encoded = JsonString(message);
        for (const common::LogField& f : fields) {
          encoded += "," + JsonString(f.key) + ":" + JsonString(f.value);
        }
        logger->log(ToSpdlog(level), "{}", encoded);
      });
  common::SetLogLevel(verbose || flags.v >= 4 ? common::LogLevel::kDebug : common::LogLevel::kInfo);
}

int Fatal(std::string_view who, const std::string& message) {
  common::Log(common::LogLevel::kError, std::string(who) + ": " + message, {{"reason", "fatal"}});
  return 1;
}

}  // namespace gpusched::cli
