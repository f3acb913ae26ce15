#pragma once

// Structured fields on a log line: every decision a daemon logs (a pod bound, refused, preempted, handed its GPUs)
// carries the pod, node, GPUs and reason as fields, so that a log pipeline filters on them instead of parsing
// prose. The binary's structured sink (cli/logging.h) writes them as JSON keys (--log-format json) or as
// `key=value` pairs after the message (text). Without one, the plain sink of log.h gets the text form.

#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

#include "gpusched/common/log.h"

namespace gpusched::common {

struct LogField {
  std::string_view key;  // a literal: pod, node, gpus, reason, ...
  std::string value;
};

using StructuredLogSink = std::function<void(LogLevel, std::string_view message, std::span<const LogField> fields)>;

// Replaces the process-wide structured sink; call once at start-up, before threads start. Null = the text form
// through the plain sink.
void SetStructuredLogSink(StructuredLogSink sink);

// The message and its fields; fields with an empty value are left out.
void Log(LogLevel level, std::string_view message, std::initializer_list<LogField> fields);

// The text form: message, then ` key=value` per field, the value quoted (Go %q style) when it holds a space, a quote,
// '=' or a control character, or is empty.
[[nodiscard]] std::string FormatLogFields(std::string_view message, std::span<const LogField> fields);

}  // namespace gpusched::common
