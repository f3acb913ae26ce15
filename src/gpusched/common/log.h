#pragma once

// A small logging facade: libraries log through it, the binary decides where lines go (cli/ installs a spdlog
// sink). The default sink writes to stderr. Thread-safe as long as the installed sink is.

#include <functional>
#include <string_view>

namespace gpusched::common {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

using LogSink = std::function<void(LogLevel, std::string_view)>;

// Replaces the process-wide sink; call once at start-up, before threads start.
void SetLogSink(LogSink sink);
void SetLogLevel(LogLevel level);
void Log(LogLevel level, std::string_view message);

}  // namespace gpusched::common
