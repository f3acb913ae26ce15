#include "gpusched/adapters/influxdb/line_protocol.h"

#include <array>
#include <charconv>
#include <cmath>

namespace gpusched::adapters::influxdb {
namespace {

std::string Escape(std::string_view s, std::string_view special) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    if (c == '\n' || c == '\r') {
      out += ' ';
      if (special.find(' ') != std::string_view::npos) {
        out.insert(out.size() - 1, 1, '\\');
      }
      continue;
    }
    if (special.find(c) != std::string_view::npos) {
      out += '\\';
    }
    out += c;
  }
  return out;
}

void AppendInt(std::string& out, int64_t v) {
  std::array<char, 24> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  out.append(buf.data(), r.ptr);
}

// Whole numbers print without exponent ("1700000000", not "1.7e+09"); others as the shortest exact decimal.
void AppendDouble(std::string& out, double v) {
  if (std::abs(v) < 1e15 && v == std::trunc(v)) {
    AppendInt(out, static_cast<int64_t>(v));
    return;
  }
  std::array<char, 32> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  out.append(buf.data(), r.ptr);
}

class Fields {
 public:
  explicit Fields(std::string& out) : out_(out) {}
  void Float(std::string_view key, double v) {
    if (v < 0) {
      return;  // unknown
    }
    Key(key);
    AppendDouble(out_, v);
  }
  void Int(std::string_view key, int64_t v) {
    if (v < 0) {
      return;
    }
    Key(key);
    AppendInt(out_, v);
    out_ += 'i';
  }
  void Bool(std::string_view key, bool v) {
    Key(key);
    out_ += v ? "true" : "false";
  }

 private:
  void Key(std::string_view key) {
    out_ += first_ ? ' ' : ',';
    first_ = false;
    out_ += key;
    out_ += '=';
  }
  std::string& out_;
  bool first_ = true;
};

void Tag(std::string& out, std::string_view key, std::string_view value) {
  if (value.empty()) {
    return;
  }
  out += ',';
  out += key;
  out += '=';
  out += EscapeTag(value);
}

}  // namespace

std::string EscapeMeasurement(std::string_view s) { return Escape(s, ", "); }

std::string EscapeTag(std::string_view s) { return Escape(s, ",= "); }

std::string QuoteFieldString(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

std::string GpuSampleLines(std::span<const ports::GpuSample> samples, const GpuLineOptions& options,
                           int64_t timestamp_ms) {
  std::string out;
  out.reserve(samples.size() * 320);
  const std::string measurement = EscapeMeasurement(options.measurement);
  for (const ports::GpuSample& s : samples) {
    out += measurement;
    Tag(out, "host", options.hostname);
    Tag(out, "gpu", std::to_string(s.index));
    Tag(out, "uuid", s.uuid.str());
    Tag(out, "model", s.model);
    Fields f(out);
    f.Float("gpu_util", s.gpu_utilization);
    f.Float("mem_copy_util", s.memory_utilization);
    f.Float("temperature_c", s.temperature_c);
    f.Float("power_w", s.power_w);
    f.Int("fb_used_mib", s.memory_used.value());
    f.Int("fb_free_mib", s.memory_free.value());
    if (s.memory_total.value() > 0) {
      f.Int("fb_total_mib", s.memory_total.value());
    }
    f.Int("sm_clock_mhz", s.sm_clock_mhz);
    f.Int("mem_clock_mhz", s.memory_clock_mhz);
    f.Int("last_xid", s.last_xid);
    f.Bool("healthy", s.healthy);
    f.Int("processes", static_cast<int64_t>(s.processes.size()));
    out += ' ';
    AppendInt(out, timestamp_ms);
    out += '\n';
  }
  return out;
}

}  // namespace gpusched::adapters::influxdb
