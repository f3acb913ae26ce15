#pragma once

// Line charts drawn with cairo to SVG or PNG, for simulator and benchmark reports.
//
// A chart is a plain value: fill in a LineChart and hand it to WriteSvg or WritePng. Both draw through the same
// routine, so the two files show the same picture. Layout, top to bottom: the title, the plot area (grid lines at
// every tick, axes with tick labels, the y label rotated on the left), the x label, and a legend below the plot so
// that it never covers the data.
//
// Axis ranges: an end left unset comes from the data (finite points of all series) and is widened outward to the
// next "nice" tick (a step of 1, 2 or 5 times a power of ten, about one tick per 100 px across and 60 px up), so
// data from 0 to 130 gets an x axis from 0 to 140 with ticks every 20. An end that is set is used as given, ticks
// falling inside it, and the data are clipped to the plot area. A flat range (all y equal) is widened around the
// value.
//
// Series colours come from a fixed palette of 10; series 11 to 20 reuse the colours dashed, 21 to 30 dotted, and so
// on. A point whose x or y is not finite (NaN for "no sample") breaks the line; a point with gaps on both sides is
// drawn as a dot.
//
// Errors: a chart with no series, or with no finite point and no empty_note, a series whose xs and ys differ in length,
// a set range with min >= max or a non-finite end, a size outside 200x150 .. 16384x16384 (or too small for the legend),
// or text that is not UTF-8 is InvalidArgument, and nothing is written. A file that cannot be written is Unavailable
// naming the path.
//
// Thread-safety: the functions share no state; charts may be written from several threads at once.

#include <optional>
#include <string>
#include <vector>

#include "gpusched/common/status.h"

namespace gpusched::plot {

// One line. xs[i], ys[i] is a point; points are joined in the order given (sort by x first for a function plot).
// Every member has an initialiser so that designated initialisers may leave any out without
// -Wmissing-field-initializers.
struct Series {
  std::string name{};  // shown in the legend; an empty name shows as "series N" (N counting from 1)
  std::vector<double> xs{};
  std::vector<double> ys{};  // NaN = gap
  // Optional band around the line (e.g. min and max over seeds): both empty, or both as long as xs. The band is
  // filled in the series' colour, translucent, behind every line; a point where either end is not finite breaks it.
  std::vector<double> band_lo{};
  std::vector<double> band_hi{};
};

struct LineChart {
  std::string title{};
  std::string x_label{};
  std::string y_label{};
  std::vector<Series> series{};
  // Unset: from the data, widened to nice ticks (see above).
  std::optional<double> x_min{};
  std::optional<double> x_max{};
  std::optional<double> y_min{};
  std::optional<double> y_max{};
  // Drawn in the middle of the plot area when no series has a finite point (the axes then span the set ranges, or
  // 0..1): a chart of a metric that had no samples says so instead of failing. Empty: such a chart is an error.
  std::string empty_note{};
  int width = 900;  // pixels, in both formats
  int height = 560;
};

// Writes the chart as an SVG file. The file carries the title in <title> and the series names in <desc>, as text
// (cairo draws the visible text as glyph outlines).
common::Status WriteSvg(const LineChart& chart, const std::string& path);

// Writes the chart as a PNG image of chart.width x chart.height pixels on a white background.
common::Status WritePng(const LineChart& chart, const std::string& path);

}  // namespace gpusched::plot
