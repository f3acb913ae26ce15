#include "gpusched/monitor/report.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "gpusched/plot/csv_writer.h"
#include "gpusched/plot/line_chart.h"

namespace gpusched::monitor {
namespace {

using plot::FormatNumber;

std::string Num(double v, int decimals = 3) { return FormatNumber(v, decimals); }
std::string Num(const std::optional<double>& v, int decimals = 3) { return v ? FormatNumber(*v, decimals) : ""; }

common::Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    return common::Unavailable(path + ": cannot be written: " + std::strerror(errno));
  }
  out << text;
  out.close();
  if (!out) {
    return common::Unavailable(path + ": write failed");
  }
  return common::Status::Ok();
}

// The GPUs of the run, one per UUID (a GPU two containers share is one line in a chart), in report order.
std::vector<const GpuRef*> DistinctGpus(const RunReport& r) {
  std::vector<const GpuRef*> out;
  std::set<std::string> seen;
  for (const GpuRef& g : r.gpus) {
    if (seen.insert(g.uuid).second) {
      out.push_back(&g);
    }
  }
  return out;
}

plot::LineChart ChartOf(const RunReport& r, const MetricInfo& m) {
  plot::LineChart chart{.title = r.facts.workload + ": " + m.title,
                        .x_label = "time since start (s)",
                        .y_label = m.title + (m.unit.empty() ? "" : " (" + m.unit + ")")};
  const auto by_gpu = r.samples.find(m.name);
  for (const GpuRef* g : DistinctGpus(r)) {
    plot::Series s{.name = g->Label()};
    if (by_gpu != r.samples.end()) {
      if (auto it = by_gpu->second.find(g->uuid); it != by_gpu->second.end()) {
        double last_t = -1;
        for (const Sample& x : it->second) {
          if (last_t >= 0 && x.t - last_t > 2.5 * r.facts.step_s) {  // a hole: break the line
            s.xs.push_back(std::nan(""));
            s.ys.push_back(std::nan(""));
          }
          s.xs.push_back(x.t);
          s.ys.push_back(x.value);
          last_t = x.t;
        }
      }
    }
    chart.series.push_back(std::move(s));
  }
  if (chart.series.empty()) {
    chart.series.push_back(plot::Series{.name = "(no GPU)"});
  }
  if (m.unit == "%") {
    chart.y_min = 0;
    chart.y_max = 100;
  }
  chart.x_min = 0;
  chart.empty_note = "no samples of " + m.dcgm + " for these GPUs";
  if (r.facts.started_utc.empty()) {
    chart.empty_note = "the workload never started";
  } else if (r.gpus.empty()) {
    chart.empty_note = "the workload held no GPU that could be found";
  }
  return chart;
}

// A chart's SVG made fit to sit inside a page beside others: no XML declaration, and its ids (cairo names its glyphs
// and clip paths glyph0-1, clip1, ... in every file) prefixed, since ids are shared by the whole HTML document.
std::string InlineSvg(std::string svg, const std::string& prefix) {
  if (svg.rfind("<?xml", 0) == 0) {
    const size_t end = svg.find("?>");
    if (end != std::string::npos) {
      svg.erase(0, end + 2);
    }
  }
  std::string out;
  out.reserve(svg.size() + svg.size() / 8);
  static constexpr std::string_view kMarks[] = {"id=\"", "href=\"#", "url(#"};
  size_t i = 0;
  while (i < svg.size()) {
    bool hit = false;
    for (std::string_view m : kMarks) {
      if (svg.compare(i, m.size(), m) == 0) {
        out.append(m);
        out += prefix;
        i += m.size();
        hit = true;
        break;
      }
    }
    if (!hit) {
      out += svg[i++];
    }
  }
  return out;
}

}  // namespace

std::string HtmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
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
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string RunCsv(const RunReport& r) {
  std::string out = "time_s,pod,container,node,gpu_uuid,gpu_index,metric,value,unit\n";
  for (const MetricInfo& m : r.metrics) {
    const auto by_gpu = r.samples.find(m.name);
    if (by_gpu == r.samples.end()) {
      continue;
    }
    for (const GpuRef& g : r.gpus) {
      const auto it = by_gpu->second.find(g.uuid);
      if (it == by_gpu->second.end()) {
        continue;
      }
      for (const Sample& s : it->second) {
        const std::string fields[] = {Num(s.t), g.pod,           g.container, g.node, g.uuid, std::to_string(g.index),
                                      m.name,   Num(s.value, 6), m.unit};
        std::string line;
        for (const std::string& f : fields) {
          line += (line.empty() ? "" : ",") + plot::EscapeCsvField(f);
        }
        out += line + "\n";
      }
    }
  }
  return out;
}

std::string RunHtml(const RunReport& r, const std::map<std::string, std::string>& svgs) {
  const RunFacts& f = r.facts;
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>gpusched-lab monitor: "
    << HtmlEscape(f.workload) << "</title>\n<style>body{font-family:sans-serif;margin:2em;max-width:1000px}"
    << "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
    << "th{background:#f3f3f3}td.n{text-align:right}.ok{color:#1a7f37}.bad{color:#c62828}"
    << "figure{margin:1.5em 0}svg{max-width:100%;height:auto}</style></head><body>\n";
  h << "<h1>" << HtmlEscape(f.workload) << "</h1>\n<table>\n";
  auto row = [&](const std::string& k, const std::string& v, const char* cls = nullptr) {
    h << "<tr><th>" << HtmlEscape(k) << "</th><td" << (cls ? std::string(" class=\"") + cls + "\"" : "") << ">"
      << HtmlEscape(v) << "</td></tr>\n";
  };
  row("outcome", f.outcome, f.succeeded ? "ok" : "bad");
  row("file", f.file);
  std::string objects;
  for (const std::string& o : f.objects) {
    objects += (objects.empty() ? "" : ", ") + o;
  }
  row("objects", objects);
  row("namespace", f.ns);
  std::set<std::string> nodes;
  for (const GpuRef& g : r.gpus) {
    nodes.insert(g.node);
  }
  std::string node_list;
  for (const std::string& n : nodes) {
    node_list += (node_list.empty() ? "" : ", ") + n;
  }
  row("nodes", node_list.empty() ? "-" : node_list);
  std::string gpu_list;
  for (const GpuRef& g : r.gpus) {
    gpu_list += (gpu_list.empty() ? "" : "; ") + g.pod + "/" + g.container + ": " + g.node + " GPU " +
                std::to_string(g.index) + " " + g.uuid;
  }
  row("GPUs", gpu_list.empty() ? "none found" : gpu_list);
  row("created", f.created_utc.empty() ? "-" : f.created_utc);
  row("started", f.started_utc.empty() ? "never" : f.started_utc);
  row("ended", f.ended_utc.empty() ? "-" : f.ended_utc);
  row("scheduling wait", f.wait_s ? Num(*f.wait_s, 1) + " s" : "never scheduled");
  row("duration", f.duration_s ? Num(*f.duration_s, 1) + " s" : "-");
  row("metrics source", f.source + ", every " + Num(f.step_s, 3) + " s");
  row("run id", f.run_id);
  for (const std::string& n : f.notes) {
    row("note", n);
  }
  h << "</table>\n<h2>Summary per GPU</h2>\n<table>\n<tr><th>GPU</th><th>metric</th><th>samples</th><th>mean</th>"
    << "<th>p95</th><th>max</th><th>energy (J)</th></tr>\n";
  for (const GpuRef* g : DistinctGpus(r)) {
    for (const MetricInfo& m : r.metrics) {
      std::vector<Sample> none;
      const std::vector<Sample>* s = &none;
      if (auto it = r.samples.find(m.name); it != r.samples.end()) {
        if (auto jt = it->second.find(g->uuid); jt != it->second.end()) {
          s = &jt->second;
        }
      }
      const Stats st = Summarize(*s, m.name == "power", 2.5 * f.step_s);
      const std::string unit = m.unit.empty() ? "" : " " + m.unit;
      h << "<tr><td>" << HtmlEscape(g->Label()) << "</td><td>" << HtmlEscape(m.title) << "</td><td class=\"n\">"
        << st.count << "</td>";
      if (st.count == 0) {
        h << "<td colspan=\"4\">no data</td></tr>\n";
        continue;
      }
      h << "<td class=\"n\">" << Num(st.mean, 2) << HtmlEscape(unit) << "</td><td class=\"n\">" << Num(st.p95, 2)
        << HtmlEscape(unit) << "</td><td class=\"n\">" << Num(st.max, 2) << HtmlEscape(unit) << "</td><td class=\"n\">"
        << (st.energy_j ? Num(*st.energy_j, 1) : "") << "</td></tr>\n";
    }
  }
  h << "</table>\n<h2>Metrics</h2>\n<p>Raw samples: <a href=\"metrics.csv\">metrics.csv</a>.</p>\n";
  for (const MetricInfo& m : r.metrics) {
    h << "<figure>";
    if (auto it = svgs.find(m.name); it != svgs.end()) {
      h << InlineSvg(it->second, "chart-" + m.name + "-");
    } else {
      h << "<p>no chart for " << HtmlEscape(m.title) << "</p>";
    }
    h << "<figcaption>" << HtmlEscape(m.title) << " (" << HtmlEscape(m.dcgm) << ")</figcaption></figure>\n";
  }
  h << "</body></html>\n";
  return h.str();
}

common::Status WriteRun(const RunReport& r, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return common::Unavailable(dir + ": cannot be created: " + ec.message());
  }
  GPUSCHED_RETURN_IF_ERROR(WriteText(dir + "/metrics.csv", RunCsv(r)));
  std::map<std::string, std::string> svgs;
  for (const MetricInfo& m : r.metrics) {
    const plot::LineChart chart = ChartOf(r, m);
    const std::string base = dir + "/" + m.name;
    GPUSCHED_RETURN_IF_ERROR(plot::WritePng(chart, base + ".png"));
    GPUSCHED_RETURN_IF_ERROR(plot::WriteSvg(chart, base + ".svg"));
    std::ifstream in(base + ".svg", std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    svgs[m.name] = ss.str();
  }
  return WriteText(dir + "/index.html", RunHtml(r, svgs));
}

RunSummary SummarizeRun(const RunReport& r, const std::string& relative_dir) {
  RunSummary s{.facts = r.facts, .dir = relative_dir};
  std::set<std::string> uuids;
  for (const GpuRef& g : r.gpus) {
    uuids.insert(g.uuid);
  }
  s.gpus = uuids.size();
  if (auto it = r.samples.find("util"); it != r.samples.end()) {
    double sum = 0;
    size_t n = 0;
    for (const auto& [uuid, samples] : it->second) {
      if (!uuids.contains(uuid)) {
        continue;
      }
      const Stats st = Summarize(samples, false, 0);
      sum += st.mean * static_cast<double>(st.count);
      n += st.count;
    }
    if (n > 0) {
      s.mean_util = sum / static_cast<double>(n);
    }
  }
  if (auto it = r.samples.find("power"); it != r.samples.end()) {
    double e = 0;
    for (const auto& [uuid, samples] : it->second) {
      if (uuids.contains(uuid)) {
        e += Summarize(samples, true, 2.5 * r.facts.step_s).energy_j.value_or(0);
      }
    }
    s.energy_j = e;
  }
  return s;
}

common::Status WriteSummary(const std::vector<RunSummary>& runs, const std::string& dir) {
  std::string csv = "workload,outcome,duration_s,wait_s,gpus,mean_util_pct,energy_j,dir\n";
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>gpusched-lab monitor: " << runs.size()
    << " workloads</title>\n<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
    << "td,th{border:1px solid #ccc;padding:3px 8px}td.n{text-align:right}.ok{color:#1a7f37}.bad{color:#c62828}"
    << "</style></head><body>\n<h1>" << runs.size() << " workloads</h1>\n<table>\n<tr><th>workload</th>"
    << "<th>outcome</th><th>duration (s)</th><th>scheduling wait (s)</th><th>GPUs</th><th>mean utilisation (%)</th>"
    << "<th>energy (J)</th></tr>\n";
  for (const RunSummary& s : runs) {
    const std::string fields[] = {
        s.facts.workload,       s.facts.outcome,     Num(s.facts.duration_s, 3), Num(s.facts.wait_s, 3),
        std::to_string(s.gpus), Num(s.mean_util, 2), Num(s.energy_j, 1),         s.dir};
    std::string line;
    for (const std::string& f : fields) {
      line += (line.empty() ? "" : ",") + plot::EscapeCsvField(f);
    }
    csv += line + "\n";
    h << "<tr><td><a href=\"" << HtmlEscape(s.dir) << "/index.html\">" << HtmlEscape(s.facts.workload)
      << "</a></td><td class=\"" << (s.facts.succeeded ? "ok" : "bad") << "\">" << HtmlEscape(s.facts.outcome)
      << "</td><td class=\"n\">" << Num(s.facts.duration_s, 1) << "</td><td class=\"n\">" << Num(s.facts.wait_s, 1)
      << "</td><td class=\"n\">" << s.gpus << "</td><td class=\"n\">" << Num(s.mean_util, 1) << "</td><td class=\"n\">"
      << Num(s.energy_j, 1) << "</td></tr>\n";
  }
  h << "</table>\n</body></html>\n";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return common::Unavailable(dir + ": cannot be created: " + ec.message());
  }
  GPUSCHED_RETURN_IF_ERROR(WriteText(dir + "/summary.csv", csv));
  return WriteText(dir + "/index.html", h.str());
}

}  // namespace gpusched::monitor
