#include "gpusched/plot/line_chart.h"

#include <cairo-svg.h>
#include <cairo.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <numbers>
#include <span>
#include <string_view>
#include <system_error>

namespace gpusched::plot {
namespace {

using common::Status;

constexpr int kMinWidth = 200;
constexpr int kMinHeight = 150;
constexpr int kMaxSide = 16384;

// Layout, in pixels.
constexpr double kPad = 14;
constexpr double kTitleFontSize = 17;
constexpr double kLabelFontSize = 13;
constexpr double kTickFontSize = 12;
constexpr double kLegendFontSize = 12;
constexpr double kTickLength = 5;
constexpr double kGap = 6;  // between a tick mark and its label, a label and the next block
constexpr double kRightMargin = 32;
constexpr double kMinPlotSide = 40;
constexpr double kXPixelsPerTick = 100;
constexpr double kYPixelsPerTick = 60;
constexpr double kLegendSampleLength = 28;
constexpr double kLegendRowHeight = 20;
constexpr double kLegendEntrySpacing = 22;
constexpr double kLineWidth = 2;
constexpr double kDotRadius = 2.5;

struct Rgb {
  double r, g, b;
};

constexpr Rgb FromHex(unsigned hex) {
  return {static_cast<double>((hex >> 16) & 0xFF) / 255.0, static_cast<double>((hex >> 8) & 0xFF) / 255.0,
          static_cast<double>(hex & 0xFF) / 255.0};
}

// Tableau 10: distinct hues that stay apart for most colour-blind readers.
constexpr std::array<Rgb, 10> kPalette = {FromHex(0x1F77B4), FromHex(0xFF7F0E), FromHex(0x2CA02C), FromHex(0xD62728),
                                          FromHex(0x9467BD), FromHex(0x8C564B), FromHex(0xE377C2), FromHex(0x7F7F7F),
                                          FromHex(0xBCBD22), FromHex(0x17BECF)};
constexpr Rgb kInk = FromHex(0x222222);
constexpr Rgb kFrame = FromHex(0x555555);
constexpr Rgb kGrid = FromHex(0xE3E3E3);

// Round caps turn the near-zero dashes of the third pattern into dots.
constexpr std::array<std::array<double, 4>, 4> kDashes = {{{}, {8, 4}, {0.01, 4}, {10, 4, 0.01, 4}}};
constexpr std::array<int, 4> kDashCounts = {0, 2, 2, 4};

struct CairoDeleter {
  void operator()(cairo_t* cr) const { cairo_destroy(cr); }
  void operator()(cairo_surface_t* surface) const { cairo_surface_destroy(surface); }
};
using CairoPtr = std::unique_ptr<cairo_t, CairoDeleter>;
using SurfacePtr = std::unique_ptr<cairo_surface_t, CairoDeleter>;

std::string SeriesLabel(const Series& s, std::size_t index) {
  return s.name.empty() ? "series " + std::to_string(index + 1) : s.name;
}

std::string Quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

bool Finite(double x, double y) { return std::isfinite(x) && std::isfinite(y); }

Status ValidateRange(std::string_view axis, const std::optional<double>& lo, const std::optional<double>& hi) {
  if ((lo && !std::isfinite(*lo)) || (hi && !std::isfinite(*hi))) {
    return common::InvalidArgument(std::string(axis) + " range has a non-finite end");
  }
  if (lo && hi && !(*lo < *hi)) {
    return common::InvalidArgument(std::string(axis) + " range is empty: min " + std::to_string(*lo) + " >= max " +
                                   std::to_string(*hi));
  }
  return Status::Ok();
}

Status Validate(const LineChart& chart) {
  const std::string what = "line chart " + Quoted(chart.title);
  if (chart.width < kMinWidth || chart.height < kMinHeight || chart.width > kMaxSide || chart.height > kMaxSide) {
    return common::InvalidArgument(what + ": size " + std::to_string(chart.width) + "x" + std::to_string(chart.height) +
                                   " is outside " + std::to_string(kMinWidth) + "x" + std::to_string(kMinHeight) +
                                   " .. " + std::to_string(kMaxSide) + "x" + std::to_string(kMaxSide));
  }
  if (chart.series.empty()) {
    return common::InvalidArgument(what + " has no series");
  }
  bool any_finite = false;
  for (std::size_t i = 0; i < chart.series.size(); ++i) {
    const Series& s = chart.series[i];
    if (s.xs.size() != s.ys.size()) {
      return common::InvalidArgument(what + ": series " + Quoted(SeriesLabel(s, i)) + " has " +
                                     std::to_string(s.xs.size()) + " xs but " + std::to_string(s.ys.size()) + " ys");
    }
    if ((!s.band_lo.empty() || !s.band_hi.empty()) &&
        (s.band_lo.size() != s.xs.size() || s.band_hi.size() != s.xs.size())) {
      return common::InvalidArgument(what + ": series " + Quoted(SeriesLabel(s, i)) + " has " +
                                     std::to_string(s.xs.size()) + " xs but a band of " +
                                     std::to_string(s.band_lo.size()) + " lows and " +
                                     std::to_string(s.band_hi.size()) + " highs");
    }
    for (std::size_t j = 0; j < s.xs.size() && !any_finite; ++j) {
      any_finite = Finite(s.xs[j], s.ys[j]);
    }
  }
  if (!any_finite && chart.empty_note.empty()) {
    return common::InvalidArgument(what + " is empty: no series has a finite point");
  }
  GPUSCHED_RETURN_IF_ERROR(ValidateRange(what + ": x", chart.x_min, chart.x_max));
  GPUSCHED_RETURN_IF_ERROR(ValidateRange(what + ": y", chart.y_min, chart.y_max));
  return Status::Ok();
}

// ---- Axes ----

struct Axis {
  double lo = 0;
  double hi = 1;
  double step = 1;
  std::vector<double> ticks{};
  int decimals = 0;  // for the tick labels
};

// The smallest step of 1, 2 or 5 x 10^k that cuts span into at most target intervals.
double NiceStep(double span, double target) {
  const double raw = span / std::max(1.0, target);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / magnitude;
  const double nice = f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0;
  return nice * magnitude;
}

// Steps:
//   1. Take the set ends, else the data's; widen a flat (or, with one end set, inverted) range around its value.
//   2. Pick a nice step for about one tick per pixels_per_tick.
//   3. Move each unset end outward to a multiple of the step.
//   4. Ticks are the multiples of the step inside [lo, hi].
common::Result<Axis> MakeAxis(std::string_view name, const std::optional<double>& set_lo,
                              const std::optional<double>& set_hi, double data_lo, double data_hi, double pixels,
                              double pixels_per_tick) {
  double lo = set_lo.value_or(data_lo);
  double hi = set_hi.value_or(data_hi);
  const double magnitude = std::max(std::abs(lo), std::abs(hi));
  if (!(hi - lo > magnitude * 1e-12)) {
    const double d = magnitude == 0 ? 1.0 : magnitude * 0.1;
    if (set_lo && !set_hi) {
      hi = lo + d;
    } else if (set_hi && !set_lo) {
      lo = hi - d;
    } else {
      const double mid = (lo + hi) / 2;
      lo = mid - d;
      hi = mid + d;
    }
  }
  const double step = NiceStep(hi - lo, pixels / pixels_per_tick);
  if (!std::isfinite(hi - lo) || !std::isfinite(step) || step <= 0) {
    return common::InvalidArgument(std::string(name) + " range [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                   "] cannot be drawn");
  }
  constexpr double kEps = 1e-9;
  if (!set_lo) {
    lo = std::floor(lo / step + kEps) * step;
  }
  if (!set_hi) {
    hi = std::ceil(hi / step - kEps) * step;
  }
  Axis axis{.lo = lo, .hi = hi, .step = step};
  const double first = std::ceil(lo / step - kEps);
  const double last = std::floor(hi / step + kEps);
  for (double k = first; k <= last && axis.ticks.size() < 64; k += 1) {
    const double v = k * step;
    axis.ticks.push_back(std::abs(v) < step * kEps ? 0.0 : v);  // no "-0"
  }
  axis.decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step) + kEps)));
  return axis;
}

std::string FormatTick(double v, int decimals) {
  std::array<char, 64> buf{};
  std::to_chars_result r{};
  if ((v != 0 && std::abs(v) >= 1e7) || decimals > 6) {
    r = std::to_chars(buf.data(), buf.data() + buf.size(), v, std::chars_format::general, 6);
  } else {
    r = std::to_chars(buf.data(), buf.data() + buf.size(), v, std::chars_format::fixed, decimals);
  }
  return r.ec == std::errc() ? std::string(buf.data(), r.ptr) : std::string("?");
}

// ---- Text ----

void SetColour(cairo_t* cr, const Rgb& c) { cairo_set_source_rgb(cr, c.r, c.g, c.b); }

void SetFont(cairo_t* cr, double size, bool bold = false) {
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

double TextWidth(cairo_t* cr, const std::string& s) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, s.c_str(), &e);
  return e.x_advance;
}

double FontHeight(cairo_t* cr) {
  cairo_font_extents_t e;
  cairo_font_extents(cr, &e);
  return e.ascent + e.descent;
}

// Draws s with its anchor at (x, y): halign 0 = left edge, 0.5 = centre, 1 = right edge; y is the vertical centre.
void DrawText(cairo_t* cr, const std::string& s, double x, double y, double halign) {
  cairo_font_extents_t fe;
  cairo_font_extents(cr, &fe);
  cairo_move_to(cr, x - TextWidth(cr, s) * halign, y + (fe.ascent - fe.descent) / 2);
  cairo_show_text(cr, s.c_str());
}

// ---- Series ----

struct Rect {
  double x0, y0, x1, y1;
};

// Liang-Barsky: the part of segment a->b inside r as parameters [t0, t1] of a + t (b - a); false if none.
bool ClipSegment(double ax, double ay, double bx, double by, const Rect& r, double& t0, double& t1) {
  t0 = 0;
  t1 = 1;
  const double dx = bx - ax;
  const double dy = by - ay;
  const std::array<double, 4> p = {-dx, dx, -dy, dy};
  const std::array<double, 4> q = {ax - r.x0, r.x1 - ax, ay - r.y0, r.y1 - ay};
  for (std::size_t i = 0; i < 4; ++i) {
    if (p[i] == 0) {
      if (q[i] < 0) {
        return false;
      }
      continue;
    }
    const double t = q[i] / p[i];
    if (p[i] < 0) {
      t0 = std::max(t0, t);
    } else {
      t1 = std::min(t1, t);
    }
    if (t0 > t1) {
      return false;
    }
  }
  return true;
}

void SetSeriesStyle(cairo_t* cr, std::size_t index) {
  SetColour(cr, kPalette[index % kPalette.size()]);
  const std::size_t dash = (index / kPalette.size()) % kDashes.size();
  cairo_set_dash(cr, kDashes[dash].data(), kDashCounts[dash], 0);
  cairo_set_line_width(cr, kLineWidth);
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
}

// Maps data to pixels.
struct Transform {
  Rect plot;
  const Axis* x;
  const Axis* y;
  double X(double v) const { return plot.x0 + (v - x->lo) / (x->hi - x->lo) * (plot.x1 - plot.x0); }
  double Y(double v) const { return plot.y1 - (v - y->lo) / (y->hi - y->lo) * (plot.y1 - plot.y0); }
};

// The series' band (min-max), as filled polygons over each run of points where both ends are finite. Ends far
// outside the plot are pinned to the grown plot area (the same guard DrawSeries uses) before cairo sees them.
void DrawBand(cairo_t* cr, const Series& s, std::size_t index, const Transform& tf) {
  if (s.band_lo.empty()) {
    return;
  }
  const double grow = std::max(tf.plot.x1 - tf.plot.x0, tf.plot.y1 - tf.plot.y0);
  auto pin = [&](double v, double lo, double hi) { return std::clamp(v, lo - grow, hi + grow); };
  const Rgb& c = kPalette[index % kPalette.size()];
  cairo_set_source_rgba(cr, c.r, c.g, c.b, 0.18);
  const std::size_t n = s.xs.size();
  std::size_t i = 0;
  while (i < n) {
    while (i < n && !(Finite(s.xs[i], s.band_lo[i]) && std::isfinite(s.band_hi[i]))) {
      ++i;
    }
    std::size_t j = i;
    while (j < n && Finite(s.xs[j], s.band_lo[j]) && std::isfinite(s.band_hi[j])) {
      ++j;
    }
    if (j > i) {
      cairo_new_path(cr);
      for (std::size_t k = i; k < j; ++k) {
        cairo_line_to(cr, pin(tf.X(s.xs[k]), tf.plot.x0, tf.plot.x1), pin(tf.Y(s.band_hi[k]), tf.plot.y0, tf.plot.y1));
      }
      for (std::size_t k = j; k > i; --k) {
        cairo_line_to(cr, pin(tf.X(s.xs[k - 1]), tf.plot.x0, tf.plot.x1),
                      pin(tf.Y(s.band_lo[k - 1]), tf.plot.y0, tf.plot.y1));
      }
      cairo_close_path(cr);
      cairo_fill(cr);
    }
    i = j;
  }
}

// Points far outside the plot would overflow cairo's fixed-point coordinates, so segments are first clipped to the
// plot area grown by its own size on every side; cairo's clip then trims exactly to the plot area.
void DrawSeries(cairo_t* cr, const Series& s, std::size_t index, const Transform& tf) {
  const double grow = std::max(tf.plot.x1 - tf.plot.x0, tf.plot.y1 - tf.plot.y0);
  const Rect bounds{tf.plot.x0 - grow, tf.plot.y0 - grow, tf.plot.x1 + grow, tf.plot.y1 + grow};
  const std::size_t n = s.xs.size();
  std::vector<double> px(n);
  std::vector<double> py(n);
  std::vector<bool> ok(n);
  for (std::size_t i = 0; i < n; ++i) {
    px[i] = tf.X(s.xs[i]);
    py[i] = tf.Y(s.ys[i]);
    ok[i] = Finite(s.xs[i], s.ys[i]) && Finite(px[i], py[i]);
  }

  SetSeriesStyle(cr, index);
  cairo_new_path(cr);
  bool pen_down = false;
  for (std::size_t i = 1; i < n; ++i) {
    if (!ok[i - 1] || !ok[i]) {
      pen_down = false;
      continue;
    }
    double t0 = 0;
    double t1 = 1;
    if (!ClipSegment(px[i - 1], py[i - 1], px[i], py[i], bounds, t0, t1)) {
      pen_down = false;
      continue;
    }
    const double dx = px[i] - px[i - 1];
    const double dy = py[i] - py[i - 1];
    if (!pen_down || t0 > 0) {
      cairo_move_to(cr, px[i - 1] + t0 * dx, py[i - 1] + t0 * dy);
    }
    cairo_line_to(cr, px[i - 1] + t1 * dx, py[i - 1] + t1 * dy);
    pen_down = t1 == 1;
  }
  cairo_stroke(cr);

  // A point with no finite neighbour would draw nothing as a line.
  cairo_set_dash(cr, nullptr, 0, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const bool alone = ok[i] && (i == 0 || !ok[i - 1]) && (i + 1 == n || !ok[i + 1]);
    if (alone && px[i] >= bounds.x0 && px[i] <= bounds.x1 && py[i] >= bounds.y0 && py[i] <= bounds.y1) {
      cairo_new_sub_path(cr);
      cairo_arc(cr, px[i], py[i], kDotRadius, 0, 2 * std::numbers::pi);
    }
  }
  cairo_fill(cr);
}

// ---- Legend ----

struct LegendEntry {
  std::string label;
  double width;  // sample + gap + text
};

struct LegendRow {
  std::size_t first;
  std::size_t count;
  double width;
};

std::vector<LegendRow> LayoutLegend(std::span<const LegendEntry> entries, double max_width) {
  std::vector<LegendRow> rows;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const double w = entries[i].width;
    if (!rows.empty() && rows.back().width + kLegendEntrySpacing + w <= max_width) {
      rows.back().count += 1;
      rows.back().width += kLegendEntrySpacing + w;
    } else {
      rows.push_back({.first = i, .count = 1, .width = w});
    }
  }
  return rows;
}

// ---- The chart ----

// Draws the whole chart onto cr (any surface of chart.width x chart.height). Expects a validated chart.
Status Draw(cairo_t* cr, const LineChart& chart) {
  const double width = chart.width;
  const double height = chart.height;

  constexpr double kInf = std::numeric_limits<double>::infinity();
  double x_lo = kInf;
  double x_hi = -kInf;
  double y_lo = kInf;
  double y_hi = -kInf;
  for (const Series& s : chart.series) {
    for (std::size_t i = 0; i < s.xs.size(); ++i) {
      if (Finite(s.xs[i], s.ys[i])) {
        x_lo = std::min(x_lo, s.xs[i]);
        x_hi = std::max(x_hi, s.xs[i]);
        y_lo = std::min(y_lo, s.ys[i]);
        y_hi = std::max(y_hi, s.ys[i]);
      }
      // A band widens the y range so that it shows whole.
      if (!s.band_lo.empty() && Finite(s.xs[i], s.band_lo[i]) && std::isfinite(s.band_hi[i])) {
        y_lo = std::min({y_lo, s.band_lo[i], s.band_hi[i]});
        y_hi = std::max({y_hi, s.band_lo[i], s.band_hi[i]});
      }
    }
  }
  const bool no_data = x_lo > x_hi;  // only with an empty_note (Validate)
  if (no_data) {
    x_lo = y_lo = 0;
    x_hi = y_hi = 1;
  }

  // Vertical layout: title, plot, x tick labels, x label, legend.
  SetFont(cr, kTitleFontSize, /*bold=*/true);
  const double title_height = chart.title.empty() ? 0 : FontHeight(cr);
  SetFont(cr, kLabelFontSize);
  const double label_height = FontHeight(cr);
  SetFont(cr, kTickFontSize);
  const double tick_height = FontHeight(cr);
  SetFont(cr, kLegendFontSize);
  std::vector<LegendEntry> entries;
  for (std::size_t i = 0; i < chart.series.size(); ++i) {
    std::string label = SeriesLabel(chart.series[i], i);
    const double w = kLegendSampleLength + kGap + TextWidth(cr, label);
    entries.push_back({.label = std::move(label), .width = w});
  }
  const std::vector<LegendRow> rows = LayoutLegend(entries, width - 2 * kPad);

  const double plot_top = kPad + (chart.title.empty() ? 0 : title_height + 2 * kGap);
  const double x_label_top = kTickLength + kGap + tick_height + kGap;
  const double legend_top = x_label_top + (chart.x_label.empty() ? 0 : label_height + kGap) + kGap;
  const double below_plot = legend_top + static_cast<double>(rows.size()) * kLegendRowHeight + kPad;
  const double plot_bottom = height - below_plot;
  if (plot_bottom - plot_top < kMinPlotSide) {
    return common::InvalidArgument("line chart " + Quoted(chart.title) + ": height " + std::to_string(chart.height) +
                                   " leaves no room for the plot above a legend of " +
                                   std::to_string(chart.series.size()) + " series");
  }
  auto y_axis = MakeAxis("y", chart.y_min, chart.y_max, y_lo, y_hi, plot_bottom - plot_top, kYPixelsPerTick);
  if (!y_axis.ok()) {
    return y_axis.status();
  }

  // Horizontal layout: y label, y tick labels, plot.
  SetFont(cr, kTickFontSize);
  double y_tick_width = 0;
  for (double t : y_axis->ticks) {
    y_tick_width = std::max(y_tick_width, TextWidth(cr, FormatTick(t, y_axis->decimals)));
  }
  const double plot_left = kPad + (chart.y_label.empty() ? 0 : label_height + kGap) + y_tick_width + kGap + kTickLength;
  const double plot_right = width - kRightMargin;
  if (plot_right - plot_left < kMinPlotSide) {
    return common::InvalidArgument("line chart " + Quoted(chart.title) + ": width " + std::to_string(chart.width) +
                                   " leaves no room for the plot");
  }
  const double plot_width = plot_right - plot_left;
  auto x_axis = MakeAxis("x", chart.x_min, chart.x_max, x_lo, x_hi, plot_width, kXPixelsPerTick);
  if (!x_axis.ok()) {
    return x_axis.status();
  }
  // Wide labels (large numbers, many decimals) must not run into each other: space the ticks wider if needed.
  double x_tick_width = 0;
  for (double t : x_axis->ticks) {
    x_tick_width = std::max(x_tick_width, TextWidth(cr, FormatTick(t, x_axis->decimals)));
  }
  if (x_axis->step / (x_axis->hi - x_axis->lo) * plot_width < x_tick_width + 2 * kGap) {
    x_axis = MakeAxis("x", chart.x_min, chart.x_max, x_lo, x_hi, plot_width, x_tick_width + 4 * kGap);
    if (!x_axis.ok()) {
      return x_axis.status();
    }
  }

  const Rect plot{plot_left, plot_top, plot_right, plot_bottom};
  const Transform tf{.plot = plot, .x = &*x_axis, .y = &*y_axis};
  // Hairlines land on pixel centres.
  auto crisp = [](double v) { return std::floor(v) + 0.5; };

  // Background and grid.
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_set_line_width(cr, 1);
  SetColour(cr, kGrid);
  for (double t : x_axis->ticks) {
    cairo_move_to(cr, crisp(tf.X(t)), plot.y0);
    cairo_line_to(cr, crisp(tf.X(t)), plot.y1);
  }
  for (double t : y_axis->ticks) {
    cairo_move_to(cr, plot.x0, crisp(tf.Y(t)));
    cairo_line_to(cr, plot.x1, crisp(tf.Y(t)));
  }
  cairo_stroke(cr);

  // Series, clipped to the plot area.
  cairo_save(cr);
  cairo_rectangle(cr, plot.x0, plot.y0, plot.x1 - plot.x0, plot.y1 - plot.y0);
  cairo_clip(cr);
  for (std::size_t i = 0; i < chart.series.size(); ++i) {
    DrawBand(cr, chart.series[i], i, tf);
  }
  for (std::size_t i = 0; i < chart.series.size(); ++i) {
    DrawSeries(cr, chart.series[i], i, tf);
  }
  cairo_restore(cr);
  if (no_data) {
    SetColour(cr, kInk);
    SetFont(cr, kTitleFontSize);
    DrawText(cr, chart.empty_note, (plot.x0 + plot.x1) / 2, (plot.y0 + plot.y1) / 2, 0.5);
  }

  // Frame, tick marks and tick labels.
  cairo_set_line_width(cr, 1);
  SetColour(cr, kFrame);
  cairo_rectangle(cr, crisp(plot.x0), crisp(plot.y0), std::round(plot.x1 - plot.x0), std::round(plot.y1 - plot.y0));
  for (double t : x_axis->ticks) {
    cairo_move_to(cr, crisp(tf.X(t)), plot.y1);
    cairo_line_to(cr, crisp(tf.X(t)), plot.y1 + kTickLength);
  }
  for (double t : y_axis->ticks) {
    cairo_move_to(cr, plot.x0, crisp(tf.Y(t)));
    cairo_line_to(cr, plot.x0 - kTickLength, crisp(tf.Y(t)));
  }
  cairo_stroke(cr);
  SetColour(cr, kInk);
  SetFont(cr, kTickFontSize);
  for (double t : x_axis->ticks) {
    DrawText(cr, FormatTick(t, x_axis->decimals), tf.X(t), plot.y1 + kTickLength + kGap + tick_height / 2, 0.5);
  }
  for (double t : y_axis->ticks) {
    DrawText(cr, FormatTick(t, y_axis->decimals), plot.x0 - kTickLength - kGap, tf.Y(t), 1.0);
  }

  // Title and axis labels.
  if (!chart.title.empty()) {
    SetFont(cr, kTitleFontSize, /*bold=*/true);
    DrawText(cr, chart.title, width / 2, kPad + title_height / 2, 0.5);
  }
  SetFont(cr, kLabelFontSize);
  if (!chart.x_label.empty()) {
    DrawText(cr, chart.x_label, (plot.x0 + plot.x1) / 2, plot.y1 + x_label_top + label_height / 2, 0.5);
  }
  if (!chart.y_label.empty()) {
    cairo_save(cr);
    cairo_translate(cr, kPad + label_height / 2, (plot.y0 + plot.y1) / 2);
    cairo_rotate(cr, -std::numbers::pi / 2);
    DrawText(cr, chart.y_label, 0, 0, 0.5);
    cairo_restore(cr);
  }

  // Legend: centred rows below everything else.
  SetFont(cr, kLegendFontSize);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const double cy = plot.y1 + legend_top + (static_cast<double>(r) + 0.5) * kLegendRowHeight;
    double x = (width - rows[r].width) / 2;
    for (std::size_t i = rows[r].first; i < rows[r].first + rows[r].count; ++i) {
      SetSeriesStyle(cr, i);
      cairo_move_to(cr, x + 2, cy);
      cairo_line_to(cr, x + kLegendSampleLength - 2, cy);
      cairo_stroke(cr);
      cairo_set_dash(cr, nullptr, 0, 0);
      SetColour(cr, kInk);
      DrawText(cr, entries[i].label, x + kLegendSampleLength + kGap, cy, 0);
      x += entries[i].width + kLegendEntrySpacing;
    }
  }

  const cairo_status_t st = cairo_status(cr);
  if (st == CAIRO_STATUS_INVALID_STRING) {
    return common::InvalidArgument("line chart " + Quoted(chart.title) + ": a title, label or name is not UTF-8");
  }
  if (st != CAIRO_STATUS_SUCCESS) {
    return common::Internal(std::string("drawing line chart: ") + cairo_status_to_string(st));
  }
  return Status::Ok();
}

// ---- Files ----

// Escapes text for XML character data and drops the control characters XML 1.0 forbids.
std::string XmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n' || c == '\r') {
          out += c;
        }
    }
  }
  return out;
}

Status WriteFile(const std::string& path, std::string_view data) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return common::Unavailable("cannot open " + Quoted(path) + " for writing: " + std::strerror(errno));
  }
  const bool wrote = std::fwrite(data.data(), 1, data.size(), f) == data.size();
  const int write_errno = errno;
  const bool closed = std::fclose(f) == 0;
  if (!wrote || !closed) {
    const int err = !wrote ? write_errno : errno;
    std::remove(path.c_str());  // no truncated chart left behind
    return common::Unavailable("cannot write " + Quoted(path) + ": " + std::strerror(err));
  }
  return Status::Ok();
}

cairo_status_t AppendToString(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

}  // namespace

Status WriteSvg(const LineChart& chart, const std::string& path) {
  GPUSCHED_RETURN_IF_ERROR(Validate(chart));
  // Rendered into memory, then written in one go: the text metadata goes in, and a failed draw leaves no file.
  std::string svg;
  {
    SurfacePtr surface(cairo_svg_surface_create_for_stream(&AppendToString, &svg, static_cast<double>(chart.width),
                                                           static_cast<double>(chart.height)));
    if (cairo_surface_status(surface.get()) != CAIRO_STATUS_SUCCESS) {
      return common::Internal(std::string("creating SVG surface: ") +
                              cairo_status_to_string(cairo_surface_status(surface.get())));
    }
    cairo_svg_surface_set_document_unit(surface.get(), CAIRO_SVG_UNIT_PX);
    {
      CairoPtr cr(cairo_create(surface.get()));
      GPUSCHED_RETURN_IF_ERROR(Draw(cr.get(), chart));
    }
    cairo_surface_finish(surface.get());
    const cairo_status_t st = cairo_surface_status(surface.get());
    if (st != CAIRO_STATUS_SUCCESS) {
      return common::Internal(std::string("finishing SVG for ") + Quoted(path) + ": " + cairo_status_to_string(st));
    }
  }

  std::string desc = "Line chart. Series: ";
  for (std::size_t i = 0; i < chart.series.size(); ++i) {
    desc += (i == 0 ? "" : ", ") + SeriesLabel(chart.series[i], i);
  }
  desc += ".";
  const std::size_t svg_tag = svg.find("<svg");
  const std::size_t svg_tag_end = svg_tag == std::string::npos ? std::string::npos : svg.find('>', svg_tag);
  if (svg_tag_end == std::string::npos) {
    return common::Internal("cairo wrote an SVG without an <svg> element");
  }
  svg.insert(svg_tag_end + 1, "\n<title>" + XmlEscape(chart.title) + "</title>\n<desc>" + XmlEscape(desc) + "</desc>");
  return WriteFile(path, svg);
}

Status WritePng(const LineChart& chart, const std::string& path) {
  GPUSCHED_RETURN_IF_ERROR(Validate(chart));
  SurfacePtr surface(cairo_image_surface_create(CAIRO_FORMAT_RGB24, chart.width, chart.height));
  if (cairo_surface_status(surface.get()) != CAIRO_STATUS_SUCCESS) {
    return common::ResourceExhausted(std::string("creating a ") + std::to_string(chart.width) + "x" +
                                     std::to_string(chart.height) +
                                     " image: " + cairo_status_to_string(cairo_surface_status(surface.get())));
  }
  {
    CairoPtr cr(cairo_create(surface.get()));
    GPUSCHED_RETURN_IF_ERROR(Draw(cr.get(), chart));
  }
  cairo_surface_flush(surface.get());
  const cairo_status_t st = cairo_surface_write_to_png(surface.get(), path.c_str());
  if (st == CAIRO_STATUS_WRITE_ERROR) {
    return common::Unavailable("cannot write PNG " + Quoted(path) + ": " + cairo_status_to_string(st));
  }
  if (st != CAIRO_STATUS_SUCCESS) {
    return common::Internal("writing PNG " + Quoted(path) + ": " + cairo_status_to_string(st));
  }
  return Status::Ok();
}

}  // namespace gpusched::plot
