#pragma once

// CsvWriter: rows of text fields to a CSV file (RFC 4180 quoting), and FormatNumber, which prints a double the way
// Python's repr prints it, so that CSV files from this code and from the Python tooling compare equal as text.

#include <cstdio>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "gpusched/common/status.h"

namespace gpusched::plot {

enum class LineEnding {
  kLf,    // "\n": what Unix tools and most readers expect
  kCrLf,  // "\r\n": RFC 4180 to the letter, and Python's csv module default
};

struct CsvWriterOptions {
  LineEnding line_ending = LineEnding::kLf;
};

// Writes a CSV file row by row. Fields are quoted only when they must be: when they hold a comma, a double quote, CR
// or LF; a double quote inside a quoted field is doubled. A row of one empty field is written as "" so that it does
// not read back as a blank line. The writer does not check that rows have the same number of fields.
//
// Output is buffered; an I/O error may surface only at Flush or Close, so call Close and check it. The destructor
// closes a writer that was not closed, ignoring errors.
//
// Not thread-safe: one writer, one thread (or outside locking).
class CsvWriter {
 public:
  // Creates or truncates the file. Unavailable, naming the path, if it cannot be opened.
  static common::Result<CsvWriter> Open(const std::string& path, CsvWriterOptions options = {});

  CsvWriter(CsvWriter&&) noexcept = default;
  CsvWriter& operator=(CsvWriter&&) noexcept = default;
  CsvWriter(const CsvWriter&) = delete;
  CsvWriter& operator=(const CsvWriter&) = delete;
  ~CsvWriter() = default;

  // Unavailable on a write error, FailedPrecondition after Close.
  common::Status WriteRow(std::span<const std::string> fields);
  // For literal rows: writer.WriteRow({"time_s", "util"}).
  common::Status WriteRow(std::initializer_list<std::string_view> fields);

  // Pushes buffered rows to the operating system.
  common::Status Flush();
  // Flushes and closes the file; reports any write error seen since Open. Later calls return FailedPrecondition.
  common::Status Close();

  const std::string& path() const { return path_; }

 private:
  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };

  CsvWriter(std::unique_ptr<std::FILE, FileCloser> file, std::string path, CsvWriterOptions options)
      : file_(std::move(file)), path_(std::move(path)), options_(options) {}

  common::Status WriteLine(const std::string& line);

  std::unique_ptr<std::FILE, FileCloser> file_;  // null once closed
  std::string path_;
  CsvWriterOptions options_;
};

// One field as it appears in a row: unchanged, or quoted with inner quotes doubled (see CsvWriter).
std::string EscapeCsvField(std::string_view field);

// Prints v like Python's repr(round(v, max_decimals)), or repr(v) when max_decimals < 0:
//   12.0 -> "12.0", 0.25 -> "0.25", 1e-05 -> "1e-05", 1e16 -> "1e+16", -0.0 -> "-0.0",
//   (14.015918367346941, -1) -> "14.015918367346941", (14.015918367346941, 2) -> "14.02", (2.5, 0) -> "2.0".
// Steps: round the exact binary value to max_decimals places, ties to even (as Python's round does); take the
// shortest digit string that reads back as the same double (std::to_chars); print it fixed when the decimal
// exponent is in [-4, 16), always with a fractional part, else as d.ddde+XX.
// NaN prints as "" (an empty CSV cell); infinities as "inf" and "-inf".
std::string FormatNumber(double v, int max_decimals);

}  // namespace gpusched::plot
