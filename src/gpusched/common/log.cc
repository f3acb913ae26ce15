#include "gpusched/common/log.h"

#include <atomic>
#include <cstdio>
#include <utility>

namespace gpusched::common {
namespace {

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "?";
}

LogSink& Sink() {
  static LogSink sink = [](LogLevel level, std::string_view msg) {
    std::fprintf(stderr, "[%s] %.*s\n", LevelName(level), static_cast<int>(msg.size()), msg.data());
  };
  return sink;
}

std::atomic<LogLevel>& MinLevel() {
  static std::atomic<LogLevel> level{LogLevel::kInfo};
  return level;
}

}  // namespace

void SetLogSink(LogSink sink) { Sink() = std::move(sink); }
void SetLogLevel(LogLevel level) { MinLevel() = level; }

void Log(LogLevel level, std::string_view message) {
  if (level < MinLevel().load()) {
    return;
  }
  Sink()(level, message);
}

}  // namespace gpusched::common
