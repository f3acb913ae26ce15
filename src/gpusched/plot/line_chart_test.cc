#include "gpusched/plot/line_chart.h"

#include <cairo.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

// cairo 1.16 keeps the fontconfig patterns of its toy font faces for the life of the process, which LeakSanitizer
// reports as a leak (about 1 KiB, once, not per chart). Not ours to free; hide it from ASan builds of this test.
extern "C" const char* __lsan_default_suppressions() { return "leak:libfontconfig.so\n"; }

namespace gpusched::plot {
namespace {

using common::StatusCode;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

std::string TempPath(const std::string& name) { return ::testing::TempDir() + "gpusched_line_chart_test_" + name; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

Series Curve(std::string name, const std::function<double(double)>& f) {
  Series s{.name = std::move(name)};
  for (int i = 0; i <= 130; ++i) {
    s.xs.push_back(i);
    s.ys.push_back(f(i));
  }
  return s;
}

LineChart ThreeCurves() {
  return {.title = "GPU utilisation",
          .x_label = "time (s)",
          .y_label = "utilisation (%)",
          .series = {Curve("best_fit", [](double x) { return 50 + 40 * std::sin(x / 20); }),
                     Curve("spread", [](double x) { return 30 + x / 3; }),
                     Curve("random", [](double x) { return 60 + 25 * std::cos(x / 9); })}};
}

std::uint32_t BigEndian32(const std::string& bytes, std::size_t at) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  }
  return v;
}

TEST(LineChartTest, SvgHoldsTitleAndSeriesNames) {
  LineChart chart = ThreeCurves();
  chart.series[2].name = "random <seed 7> & co";
  const std::string path = TempPath("three.svg");
  ASSERT_TRUE(WriteSvg(chart, path).ok());
  const std::string svg = ReadFile(path);
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("<title>GPU utilisation</title>"), std::string::npos);
  EXPECT_NE(svg.find("best_fit"), std::string::npos);
  EXPECT_NE(svg.find("spread"), std::string::npos);
  EXPECT_NE(svg.find("random &lt;seed 7&gt; &amp; co"), std::string::npos);
  EXPECT_NE(svg.find("width=\"900"), std::string::npos) << svg.substr(0, 400);
  std::filesystem::remove(path);
}

TEST(LineChartTest, PngHasSignatureAndRequestedSize) {
  struct Case {
    std::string name;
    int width;
    int height;
  };
  const std::vector<Case> cases = {
      {.name = "default size", .width = 900, .height = 560},
      {.name = "small", .width = 320, .height = 240},
      {.name = "odd sizes", .width = 1234, .height = 777},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    LineChart chart = ThreeCurves();
    chart.width = c.width;
    chart.height = c.height;
    const std::string path = TempPath("size.png");
    ASSERT_TRUE(WritePng(chart, path).ok());
    const std::string png = ReadFile(path);
    ASSERT_GE(png.size(), 24u);
    EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
    // The first chunk is IHDR: length (4), "IHDR" (4), width (4, big-endian), height (4).
    EXPECT_EQ(png.substr(12, 4), "IHDR");
    EXPECT_EQ(BigEndian32(png, 16), static_cast<std::uint32_t>(c.width));
    EXPECT_EQ(BigEndian32(png, 20), static_cast<std::uint32_t>(c.height));
    std::filesystem::remove(path);
  }
}

TEST(LineChartTest, InvalidChartsAreRejectedAndWriteNothing) {
  struct Case {
    std::string name;
    std::function<void(LineChart&)> change;
    std::string want_in_message;
  };
  const std::vector<Case> cases = {
      {.name = "xs and ys differ in length",
       .change = [](LineChart& c) { c.series[1].ys.pop_back(); },
       .want_in_message = "'spread'"},
      {.name = "unnamed series is named by position",
       .change =
           [](LineChart& c) {
             c.series[2].name = "";
             c.series[2].xs.push_back(1);
           },
       .want_in_message = "'series 3'"},
      {.name = "no series", .change = [](LineChart& c) { c.series.clear(); }, .want_in_message = "no series"},
      {.name = "no finite point",
       .change =
           [](LineChart& c) {
             c.series = {Series{.name = "gaps", .xs = {1, 2}, .ys = {kNan, kNan}}, Series{.name = "none"}};
           },
       .want_in_message = "no series has a finite point"},
      {.name = "x range inverted",
       .change =
           [](LineChart& c) {
             c.x_min = 10;
             c.x_max = 5;
           },
       .want_in_message = "x range"},
      {.name = "y range not finite", .change = [](LineChart& c) { c.y_max = kNan; }, .want_in_message = "y range"},
      {.name = "too narrow", .change = [](LineChart& c) { c.width = 50; }, .want_in_message = "size 50x560"},
      {.name = "legend fills the height",
       .change =
           [](LineChart& c) {
             c.height = 150;
             c.width = 200;
             for (int i = 0; i < 30; ++i) {
               c.series.push_back(Series{.name = "extra " + std::to_string(i), .xs = {0}, .ys = {0}});
             }
           },
       .want_in_message = "no room"},
      {.name = "title not UTF-8",
       .change = [](LineChart& c) { c.title = "bad \xff byte"; },
       .want_in_message = "UTF-8"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    LineChart chart = ThreeCurves();
    c.change(chart);
    for (const std::string& ext : {std::string(".svg"), std::string(".png")}) {
      const std::string path = TempPath("invalid" + ext);
      std::filesystem::remove(path);
      const common::Status s = ext == ".svg" ? WriteSvg(chart, path) : WritePng(chart, path);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << ext << ": " << s;
      EXPECT_NE(s.message().find(c.want_in_message), std::string::npos) << ext << ": " << s;
      EXPECT_FALSE(std::filesystem::exists(path)) << ext;
    }
  }
}

TEST(LineChartTest, ANoDataChartWithANoteIsDrawnWithTheNote) {
  LineChart chart{.title = "power",
                  .x_label = "time (s)",
                  .y_label = "W",
                  .series = {Series{.name = "GPU 0", .xs = {0, 1}, .ys = {kNan, kNan}}}};
  const std::string svg_path = TempPath("nodata.svg");
  EXPECT_EQ(WriteSvg(chart, svg_path).code(), StatusCode::kInvalidArgument);  // no note: an error, as before
  chart.empty_note = "no samples of power";
  chart.x_min = 0;
  chart.x_max = 60;
  ASSERT_TRUE(WriteSvg(chart, svg_path).ok());
  const std::string png_path = TempPath("nodata.png");
  ASSERT_TRUE(WritePng(chart, png_path).ok());
  // The note is drawn: the PNG differs from the same chart with an empty-looking note.
  LineChart blank = chart;
  blank.empty_note = " ";
  const std::string blank_path = TempPath("nodata-blank.png");
  ASSERT_TRUE(WritePng(blank, blank_path).ok());
  EXPECT_NE(ReadFile(png_path), ReadFile(blank_path));
  std::filesystem::remove(svg_path);
  std::filesystem::remove(png_path);
  std::filesystem::remove(blank_path);
}

TEST(LineChartTest, UnwritablePathIsUnavailableNamingThePath) {
  const LineChart chart = ThreeCurves();
  const common::Status svg = WriteSvg(chart, "/nonexistent-dir/x.svg");
  EXPECT_EQ(svg.code(), StatusCode::kUnavailable) << svg;
  EXPECT_NE(svg.message().find("/nonexistent-dir/x.svg"), std::string::npos) << svg;
  const common::Status png = WritePng(chart, "/nonexistent-dir/x.png");
  EXPECT_EQ(png.code(), StatusCode::kUnavailable) << png;
  EXPECT_NE(png.message().find("/nonexistent-dir/x.png"), std::string::npos) << png;
}

TEST(LineChartTest, DrawsUnusualButValidData) {
  struct Case {
    std::string name;
    LineChart chart;
  };
  const std::vector<Case> cases = {
      {.name = "single point", .chart = {.series = {{.name = "one", .xs = {3}, .ys = {7}}}}},
      {.name = "flat line at zero", .chart = {.series = {{.name = "zero", .xs = {0, 1, 2}, .ys = {0, 0, 0}}}}},
      {.name = "gaps and isolated points",
       .chart = {.series = {{.name = "gappy", .xs = {0, 1, 2, 3, 4, 5}, .ys = {1, kNan, 3, kNan, 5, 6}}}}},
      {.name = "data far outside a set range",
       .chart = {.series = {{.name = "wild", .xs = {0, 1, 2, 3}, .ys = {0.5, 1e300, -1e300, 0.5}}},
                 .y_min = 0,
                 .y_max = 1}},
      {.name = "one end set below the data",
       .chart = {.series = {{.name = "low", .xs = {0, 1}, .ys = {1, 2}}}, .y_min = 10}},
      {.name = "tiny and huge values",
       .chart = {.series = {{.name = "tiny", .xs = {1e-9, 2e-9}, .ys = {1e-12, 3e-12}},
                            {.name = "huge", .xs = {1e-9, 2e-9}, .ys = {1e9, 3e9}}}}},
      {.name = "many series cycle colours and dashes",
       .chart =
           [] {
             LineChart c{.height = 700};
             for (int i = 0; i < 25; ++i) {
               c.series.push_back(Series{.name = "s" + std::to_string(i), .xs = {0, 1}, .ys = {0.0 + i, 1.0 + i}});
             }
             return c;
           }()},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = TempPath("unusual");
    EXPECT_TRUE(WriteSvg(c.chart, path + ".svg").ok());
    EXPECT_TRUE(WritePng(c.chart, path + ".png").ok());
    std::filesystem::remove(path + ".svg");
    std::filesystem::remove(path + ".png");
  }
}

// Counts pixels of the first series' blue (#1F77B4, antialiased edges included) in a PNG: blue above red by more
// than `margin`. 60 finds the lines; 8 also finds the translucent band fill (white, grey and black never count).
int CountBluePixels(const std::string& path, int margin = 60) {
  std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)> image(
      cairo_image_surface_create_from_png(path.c_str()), &cairo_surface_destroy);
  EXPECT_EQ(cairo_surface_status(image.get()), CAIRO_STATUS_SUCCESS);
  const int w = cairo_image_surface_get_width(image.get());
  const int h = cairo_image_surface_get_height(image.get());
  const int stride = cairo_image_surface_get_stride(image.get());
  const unsigned char* data = cairo_image_surface_get_data(image.get());
  int count = 0;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      std::uint32_t px = 0;
      std::memcpy(&px, data + static_cast<std::ptrdiff_t>(y) * stride + x * 4, 4);
      const int r = static_cast<int>((px >> 16) & 0xFF);
      const int b = static_cast<int>(px & 0xFF);
      count += b > r + margin ? 1 : 0;
    }
  }
  return count;
}

TEST(LineChartTest, BandIsFilledBehindTheLineAndWidensTheRange) {
  // A flat line at 1 with a band from 0.5 to 1.5 over x in [0, 100]; y range from the data.
  Series line{.name = "line"};
  for (int x = 0; x <= 100; ++x) {
    line.xs.push_back(x);
    line.ys.push_back(1);
  }
  Series banded = line;
  banded.band_lo.assign(banded.xs.size(), 0.5);
  banded.band_hi.assign(banded.xs.size(), 1.5);
  banded.band_lo[50] = kNan;  // breaks the band, not the line
  const std::string plain_path = TempPath("plain.png");
  const std::string band_path = TempPath("band.png");
  ASSERT_TRUE(WritePng({.series = {line}}, plain_path).ok());
  ASSERT_TRUE(WritePng({.series = {banded}}, band_path).ok());
  const int plain = CountBluePixels(plain_path, 8);
  const int band = CountBluePixels(band_path, 8);
  // The band covers most of the plot area (the range is widened to hold it): many times the line's pixels.
  EXPECT_GT(band, 10 * plain) << "plain " << plain << ", banded " << band;
  std::filesystem::remove(plain_path);
  std::filesystem::remove(band_path);
  // A band of the wrong length is an error naming the series, and nothing is written.
  Series bad = line;
  bad.band_lo.assign(3, 0.5);
  bad.band_hi.assign(3, 1.5);
  const std::string bad_path = TempPath("bad-band.png");
  const common::Status s = WritePng({.series = {bad}}, bad_path);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'line' has 101 xs but a band of 3 lows and 3 highs"), std::string::npos) << s.message();
  EXPECT_FALSE(std::filesystem::exists(bad_path));
}

TEST(LineChartTest, NanBreaksTheLine) {
  // A flat line over x in [0, 100]; NaN for x in [30, 70) leaves about 40% of it undrawn.
  Series line{.name = "line"};
  Series gappy{.name = "line"};
  for (int x = 0; x <= 100; ++x) {
    line.xs.push_back(x);
    line.ys.push_back(1);
    gappy.xs.push_back(x);
    gappy.ys.push_back(x >= 30 && x < 70 ? kNan : 1);
  }
  const std::string full_path = TempPath("full.png");
  const std::string gap_path = TempPath("gap.png");
  ASSERT_TRUE(WritePng({.series = {line}, .y_min = 0, .y_max = 2}, full_path).ok());
  ASSERT_TRUE(WritePng({.series = {gappy}, .y_min = 0, .y_max = 2}, gap_path).ok());
  const int full = CountBluePixels(full_path);
  const int gap = CountBluePixels(gap_path);
  EXPECT_GT(full, 0);
  EXPECT_LT(gap, full * 0.75) << "full " << full << ", with gap " << gap;
  std::filesystem::remove(full_path);
  std::filesystem::remove(gap_path);
}

}  // namespace
}  // namespace gpusched::plot
