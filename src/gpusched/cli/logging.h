#pragma once

// How every daemon (agent, extender, scheduler, webhook) logs: through spdlog to stderr, one line per message with
// an RFC 3339 UTC timestamp and the level, or one JSON object per line (--log-format json: ts, level, component,
// msg) for log pipelines. A decision's structured fields (common/log_fields.h: pod, node, gpus, reason, ...) follow
// the message as key=value pairs, or are keys of the JSON object. Verbosity as kube users type it: --v=N (0-3 info, 4
// and above debug; -v/--verbose is
// --v=4).

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>

namespace gpusched::cli {

struct LogFlags {
  int v = 0;
  std::string format = "text";  // text | json
};

// Adds --v and --log-format to a daemon's command.
void AddLogFlags(CLI::App& cmd, LogFlags& flags);

// Installs the sink (common::SetLogSink) and the level: debug when verbose or v >= 4, else info.
void SetUpLogging(const LogFlags& flags, bool verbose, std::string_view component);

// A daemon's last line before it exits: "<who>: <message>" through the logger at error level with reason=fatal (one
// JSON object under --log-format json, so the line that explains a CrashLoopBackOff reaches the log pipeline too).
// Returns 1, the exit status.
int Fatal(std::string_view who, const std::string& message);

}  // namespace gpusched::cli
