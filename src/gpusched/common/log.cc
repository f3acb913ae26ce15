#include "gpusched/common/log.h"

#include "gpusched/common/log_fields.h"

#include <atomic>
#include <cstdio>
#include <utility>
#include <vector>

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

StructuredLogSink& Structured() {
  static StructuredLogSink sink;
  return sink;
}

std::atomic<LogLevel>& MinLevel() {
  static std::atomic<LogLevel> level{LogLevel::kInfo};
  return level;
}

}  // namespace

void SetLogSink(LogSink sink) { Sink() = std::move(sink); }
void SetLogLevel(LogLevel level) { MinLevel() = level; }
void SetStructuredLogSink(StructuredLogSink sink) { Structured() = std::move(sink); }

void Log(LogLevel level, std::string_view message) {
  if (level < MinLevel().load()) {
    return;
  }
  Sink()(level, message);
}

std::string FormatLogFields(std::string_view message, std::span<const LogField> fields) {
  std::string out(message);
  for (const LogField& f : fields) {
    out += ' ';
    out += f.key;
    out += '=';
    bool quote = f.value.empty();
    for (const char c : f.value) {
      quote = quote || c == ' ' || c == '"' || c == '=' || static_cast<unsigned char>(c) < 0x20;
    }
    if (!quote) {
      out += f.value;
      continue;
    }
    out += '"';
    for (const char c : f.value) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += c;
      } else if (c == '\n') {
        out += "\\n";
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
        out += buf;
      } else {
        out += c;
      }
    }
    out += '"';
  }
  return out;
}

void Log(LogLevel level, std::string_view message, std::initializer_list<LogField> fields) {
  if (level < MinLevel().load()) {
    return;
  }
  std::vector<LogField> kept;
  kept.reserve(fields.size());
  for (const LogField& f : fields) {
    if (!f.value.empty()) {
      kept.push_back(f);
    }
  }
  if (Structured()) {
    Structured()(level, message, kept);
    return;
  }
  Sink()(level, FormatLogFields(message, kept));
}

}  // namespace gpusched::common
