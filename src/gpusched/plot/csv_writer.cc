#include "gpusched/plot/csv_writer.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <system_error>
#include <vector>

namespace gpusched::plot {

using common::Status;

common::Result<CsvWriter> CsvWriter::Open(const std::string& path, CsvWriterOptions options) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "wb"));
  if (file == nullptr) {
    return common::Unavailable("cannot open '" + path + "' for writing: " + std::strerror(errno));
  }
  return CsvWriter(std::move(file), path, options);
}

Status CsvWriter::WriteLine(const std::string& line) {
  if (file_ == nullptr) {
    return common::FailedPrecondition("CSV writer for '" + path_ + "' is closed");
  }
  const std::string_view ending = options_.line_ending == LineEnding::kCrLf ? "\r\n" : "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_.get()) != line.size() ||
      std::fwrite(ending.data(), 1, ending.size(), file_.get()) != ending.size()) {
    return common::Unavailable("cannot write to '" + path_ + "': " + std::strerror(errno));
  }
  return Status::Ok();
}

Status CsvWriter::WriteRow(std::span<const std::string> fields) {
  if (fields.size() == 1 && fields[0].empty()) {
    return WriteLine("\"\"");
  }
  std::string line;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) {
      line += ',';
    }
    line += EscapeCsvField(fields[i]);
  }
  return WriteLine(line);
}

Status CsvWriter::WriteRow(std::initializer_list<std::string_view> fields) {
  const std::vector<std::string> owned(fields.begin(), fields.end());
  return WriteRow(owned);
}

Status CsvWriter::Flush() {
  if (file_ == nullptr) {
    return common::FailedPrecondition("CSV writer for '" + path_ + "' is closed");
  }
  if (std::fflush(file_.get()) != 0 || std::ferror(file_.get()) != 0) {
    return common::Unavailable("cannot write to '" + path_ + "': " + std::strerror(errno));
  }
  return Status::Ok();
}

Status CsvWriter::Close() {
  if (file_ == nullptr) {
    return common::FailedPrecondition("CSV writer for '" + path_ + "' is already closed");
  }
  const bool flushed = std::fflush(file_.get()) == 0 && std::ferror(file_.get()) == 0;
  const int flush_errno = errno;
  const bool closed = std::fclose(file_.release()) == 0;
  if (!flushed || !closed) {
    return common::Unavailable("cannot write to '" + path_ + "': " + std::strerror(flushed ? errno : flush_errno));
  }
  return Status::Ok();
}

std::string EscapeCsvField(std::string_view field) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) {
    return std::string(field);
  }
  std::string out = "\"";
  for (char c : field) {
    if (c == '"') {
      out += '"';
    }
    out += c;
  }
  out += '"';
  return out;
}

namespace {

// repr(v) for a finite v: see FormatNumber.
std::string ShortestRepr(double v) {
  std::array<char, 64> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v, std::chars_format::scientific);
  if (r.ec != std::errc()) {
    return "?";  // cannot happen: 64 chars hold any double
  }
  // buf: [-]d[.ddd]e(+|-)XX
  std::string_view s(buf.data(), static_cast<std::size_t>(r.ptr - buf.data()));
  std::string out;
  if (s.front() == '-') {
    out += '-';
    s.remove_prefix(1);
  }
  const std::size_t e = s.find('e');
  std::string digits;
  for (char c : s.substr(0, e)) {
    if (c != '.') {
      digits += c;
    }
  }
  const int exponent = std::atoi(std::string(s.substr(e + 1)).c_str());
  const int ndigits = static_cast<int>(digits.size());
  if (exponent >= -4 && exponent < 16) {
    const int point = exponent + 1;  // digits before the decimal point
    if (point <= 0) {
      out += "0." + std::string(static_cast<std::size_t>(-point), '0') + digits;
    } else if (point >= ndigits) {
      out += digits + std::string(static_cast<std::size_t>(point - ndigits), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<std::size_t>(point)) + "." + digits.substr(static_cast<std::size_t>(point));
    }
  } else {
    out += digits.substr(0, 1);
    if (ndigits > 1) {
      out += "." + digits.substr(1);
    }
    const int abs_exp = std::abs(exponent);
    out += exponent < 0 ? "e-" : "e+";
    out += (abs_exp < 10 ? "0" : "") + std::to_string(abs_exp);
  }
  return out;
}

}  // namespace

std::string FormatNumber(double v, int max_decimals) {
  if (std::isnan(v)) {
    return "";
  }
  if (std::isinf(v)) {
    return v > 0 ? "inf" : "-inf";
  }
  if (max_decimals >= 0) {
    // Beyond 1074 places every double is exact (the smallest subnormal is 2^-1074), so rounding changes nothing.
    const int places = std::min(max_decimals, 1100);
    // Up to 309 integer digits, sign, point, places.
    std::vector<char> buf(static_cast<std::size_t>(places) + 320);
    const auto w = std::to_chars(buf.data(), buf.data() + buf.size(), v, std::chars_format::fixed, places);
    double rounded = v;
    if (w.ec == std::errc()) {
      const auto p = std::from_chars(buf.data(), w.ptr, rounded);
      if (p.ec != std::errc()) {
        rounded = v;
      }
    }
    v = rounded;
  }
  return ShortestRepr(v);
}

}  // namespace gpusched::plot
