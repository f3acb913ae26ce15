#include "gpusched/sim/tenants.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gpusched/plot/line_chart.h"

namespace gpusched::sim {

common::Status WriteTenantReport(const std::string& dir, const TenantOutcome& o) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return common::InvalidArgument("cannot create " + dir + ": " + ec.message());
  // At most 2000 points per series: every k-th event, the last one always.
  size_t n = 0;
  while (n < o.times_s.size() && o.times_s[n] <= 2.0 * static_cast<double>(std::max<int64_t>(1, o.last_arrival_s))) {
    ++n;
  }
  const size_t step = std::max<size_t>(1, n / 2000);
  std::ofstream csv(dir + "/shares.csv");
  csv << "time_min";
  for (const auto& q : o.queues) csv << "," << q.name;
  csv << "\n";
  plot::LineChart chart{.title = "Share of the cluster's GPU compute per queue",
                        .x_label = "simulated time (minutes)",
                        .y_label = "share (%)"};
  for (const auto& q : o.queues) chart.series.push_back(plot::Series{.name = q.name});
  std::vector<size_t> points;
  for (size_t e = 0; e < n; e += step) points.push_back(e);
  if (n > 0 && points.back() != n - 1) points.push_back(n - 1);
  for (size_t e : points) {
    const double h = o.times_s[e] / 60.0;
    csv << fmt::format("{:.4f}", h);
    for (size_t q = 0; q < o.queues.size(); ++q) {
      csv << fmt::format(",{:.5f}", o.shares[q][e]);
      chart.series[q].xs.push_back(h);
      chart.series[q].ys.push_back(100 * o.shares[q][e]);
    }
    csv << "\n";
  }
  if (!csv) return common::InvalidArgument("cannot write " + dir + "/shares.csv");
  chart.y_min = 0;
  GPUSCHED_RETURN_IF_ERROR(plot::WriteSvg(chart, dir + "/shares.svg"));
  return plot::WritePng(chart, dir + "/shares.png");
}

}  // namespace gpusched::sim
