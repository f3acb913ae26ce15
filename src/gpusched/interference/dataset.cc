#include "gpusched/interference/dataset.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fmt/format.h"

namespace gpusched::interference {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

common::Result<std::string> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return common::NotFound(fmt::format("{}: cannot open", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

common::Result<nlohmann::json> ParseJson(std::string_view text, const std::string& path) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return common::InvalidArgument(fmt::format("{}: not valid JSON", path));
  return j;
}

common::Result<nlohmann::json> ReadJson(const std::string& path) {
  GPUSCHED_ASSIGN_OR_RETURN(text, ReadAll(path));
  return ParseJson(text, path);
}

// Builds a Dataset incrementally: apps by name, tables by GPU, pairs set in both directions.
class Builder {
 public:
  explicit Builder(std::string source) { data_.source = std::move(source); }
  size_t AddApp(std::string_view name) {
    auto it = index_.find(std::string(name));
    if (it != index_.end()) return it->second;
    const size_t i = data_.apps.size();
    data_.apps.push_back(ParseAppName(name));
    index_.emplace(std::string(name), i);
    return i;
  }
  interference::App& AppRef(size_t i) { return data_.apps[i]; }
  std::map<std::pair<size_t, size_t>, double>& Pairs(const std::string& gpu) { return pairs_[gpu]; }
  std::map<size_t, double>& Iso(const std::string& gpu) { return iso_[gpu]; }
  void Gpu(const std::string& gpu) {
    if (std::find(gpus_.begin(), gpus_.end(), gpu) == gpus_.end()) gpus_.push_back(gpu);
  }
  Dataset Finish() {
    const size_t n = data_.apps.size();
    for (const std::string& g : gpus_) {
      GpuTable t;
      t.gpu = g;
      t.iso.assign(n, kNaN);
      t.slowdown.assign(n * n, kNaN);
      for (const auto& [i, v] : iso_[g]) t.iso[i] = v;
      for (const auto& [ij, v] : pairs_[g]) t.slowdown[ij.first * n + ij.second] = v;
      data_.gpus.push_back(std::move(t));
    }
    return std::move(data_);
  }

 private:
  Dataset data_;
  std::map<std::string, size_t> index_;
  std::vector<std::string> gpus_;
  std::map<std::string, std::map<std::pair<size_t, size_t>, double>> pairs_;
  std::map<std::string, std::map<size_t, double>> iso_;
};

// "('ResNet-18 (batch size 16)', 1)" -> {"ResNet-18 (batch size 16)", 1}.
std::optional<std::pair<std::string, int>> ParseGavelKey(std::string_view key) {
  if (key.size() < 7 || key.substr(0, 2) != "('" || key.back() != ')') return std::nullopt;
  const size_t close = key.rfind("', ");
  if (close == std::string_view::npos || close < 2) return std::nullopt;
  const std::string_view name = key.substr(2, close - 2);
  const std::string_view scale = key.substr(close + 3, key.size() - close - 4);
  int s = 0;
  const auto [p, ec] = std::from_chars(scale.data(), scale.data() + scale.size(), s);
  if (ec != std::errc() || p != scale.data() + scale.size()) return std::nullopt;
  return std::pair{std::string(name), s};
}

std::vector<std::string> SplitCsvLine(std::string_view line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(std::move(cur));
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  out.push_back(std::move(cur));
  return out;
}

// A number, or nullopt for "" / "inf" (does not fit); an error for anything else.
common::Result<std::optional<double>> ParseSlowdownField(const std::string& s, const std::string& where) {
  if (s.empty() || s == "inf" || s == "infeasible") return std::optional<double>{};
  double v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !(v > 0) || !std::isfinite(v)) {
    return common::InvalidArgument(fmt::format("{}: slowdown {:?} is not a positive number, empty or inf", where, s));
  }
  return std::optional<double>{v};
}

common::Result<double> ParseNumberField(const std::string& s, const std::string& where, const char* what) {
  double v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v) || v < 0) {
    return common::InvalidArgument(fmt::format("{}: {} {:?} is not a non-negative number", where, what, s));
  }
  return v;
}

// Sets s(i|j) once; a second, different value for the same ordered pair is an error.
common::Status SetPair(std::map<std::pair<size_t, size_t>, double>& pairs, size_t i, size_t j, double v,
                       const std::string& where) {
  auto [it, inserted] = pairs.emplace(std::pair{i, j}, v);
  if (!inserted && std::abs(it->second - v) > 1e-9 * std::max(1.0, std::abs(v))) {
    return common::InvalidArgument(fmt::format("{}: contradicts an earlier measurement of the same pair", where));
  }
  return common::Status::Ok();
}

// Co-scheML's three application classes (its README): the family used by leave-one-family-out.
std::string CoschemlFamily(std::string_view app) {
  static const std::map<std::string, std::string, std::less<>> kClass = {
      {"LAMMPS", "HPC"},        {"GROMACS", "HPC"},
      {"HOOMD", "HPC"},         {"QMCPACK", "HPC"},
      {"CNN", "DL-train"},      {"Googlenet", "DL-train"},
      {"Alexnet", "DL-train"},  {"vgg16", "DL-train"},
      {"vgg11", "DL-train"},    {"classification", "DL-infer"},
      {"multiout", "DL-infer"}, {"regression", "DL-infer"}};
  auto it = kClass.find(app);
  return it == kClass.end() ? std::string(app) : it->second;
}

}  // namespace

std::optional<size_t> Dataset::AppIndex(std::string_view name) const {
  for (size_t i = 0; i < apps.size(); ++i) {
    if (apps[i].name == name) return i;
  }
  return std::nullopt;
}

std::vector<bool> Dataset::MeasuredApps(const GpuTable& t) const {
  const size_t n = apps.size();
  std::vector<bool> out(n, false);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n && !out[i]; ++j) out[i] = Measured(At(t, i, j));
  }
  return out;
}

const GpuTable* Dataset::Find(std::string_view gpu) const {
  for (const GpuTable& t : gpus) {
    if (t.gpu == gpu) return &t;
  }
  return nullptr;
}

App ParseAppName(std::string_view name) {
  App a;
  a.name = std::string(name);
  a.family = a.name;
  const std::string_view marker = " (batch size ";
  const size_t pos = name.find(marker);
  if (pos != std::string_view::npos && name.back() == ')') {
    const std::string_view num = name.substr(pos + marker.size(), name.size() - pos - marker.size() - 1);
    double b = 0;
    const auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), b);
    if (ec == std::errc() && p == num.data() + num.size() && b > 0) {
      a.family = std::string(name.substr(0, pos));
      a.batch_size = b;
    }
  }
  return a;
}

common::Result<Dataset> LoadGavel(const std::string& json_path) {
  GPUSCHED_ASSIGN_OR_RETURN(text, ReadAll(json_path));
  return ParseGavel(text, json_path);
}

common::Result<Dataset> ParseGavel(std::string_view text, const std::string& json_path) {
  GPUSCHED_ASSIGN_OR_RETURN(j, ParseJson(text, json_path));
  if (!j.is_object()) return common::InvalidArgument(json_path + ": expected an object keyed by GPU type");
  Builder b(json_path);
  for (const char* gpu : {"k80", "p100", "v100"}) {
    auto g = j.find(gpu);
    if (g == j.end()) continue;
    if (!g->is_object()) return common::InvalidArgument(fmt::format("{}: [{}] is not an object", json_path, gpu));
    b.Gpu(gpu);
    for (const auto& [key, entry] : g->items()) {
      const std::string where = fmt::format("{}: [{}][{}]", json_path, gpu, key);
      const auto job = ParseGavelKey(key);
      if (!job) return common::InvalidArgument(where + ": key is not ('<job>', <scale>)");
      if (job->second != 1) continue;
      if (!entry.is_object()) return common::InvalidArgument(where + ": not an object");
      const size_t a = b.AddApp(job->first);
      for (const auto& [other, value] : entry.items()) {
        const std::string w2 = fmt::format("{}[{}]", where, other);
        if (other == "null") {
          if (!value.is_number() || value.get<double>() <= 0) {
            return common::InvalidArgument(w2 + ": isolated throughput is not a positive number");
          }
          b.Iso(gpu)[a] = value.get<double>();
          continue;
        }
        const auto job2 = ParseGavelKey(other);
        if (!job2) return common::InvalidArgument(w2 + ": key is not ('<job>', <scale>)");
        if (job2->second != 1) continue;
        if (!value.is_array() || value.size() != 2 || !value[0].is_number() || !value[1].is_number()) {
          return common::InvalidArgument(w2 + ": expected [throughput, throughput of the other job]");
        }
        const size_t c = b.AddApp(job2->first);
        const double ta = value[0].get<double>();
        b.Pairs(gpu)[{a, c}] = ta;  // throughput for now; turned into a slowdown below
      }
    }
  }
  // Throughputs -> slowdowns, once every isolated throughput is known.
  Dataset d = b.Finish();
  const size_t n = d.size();
  for (GpuTable& t : d.gpus) {
    for (size_t i = 0; i < n; ++i) {
      for (size_t k = 0; k < n; ++k) {
        double& v = t.slowdown[i * n + k];
        if (std::isnan(v)) continue;
        if (v <= 0) {
          v = kInfeasible;
        } else if (std::isnan(t.iso[i])) {
          return common::InvalidArgument(
              fmt::format("{}: [{}] {:?} has pairs but no isolated throughput", json_path, t.gpu, d.apps[i].name));
        } else {
          v = t.iso[i] / v;
        }
      }
    }
  }
  if (d.apps.empty()) return common::InvalidArgument(json_path + ": no single-GPU jobs of k80, p100 or v100");
  return d;
}

common::Result<Dataset> LoadCoscheml(const std::string& dir) {
  const std::string table_path = dir + "/interference_12apps.json";
  GPUSCHED_ASSIGN_OR_RETURN(t, ReadJson(table_path));
  if (!t.is_object()) return common::InvalidArgument(table_path + ": expected {foreground: {background: slowdown}}");
  Builder b(dir);
  b.Gpu("coscheml");
  for (const auto& [fg, row] : t.items()) {
    const size_t i = b.AddApp(fg);
    if (!row.is_object()) return common::InvalidArgument(fmt::format("{}: [{}] is not an object", table_path, fg));
    for (const auto& [bg, v] : row.items()) {
      const std::string where = fmt::format("{}: [{}][{}]", table_path, fg, bg);
      if (!v.is_number()) return common::InvalidArgument(where + ": not a number");
      const double s = v.get<double>();
      if (s != -1 && !(s > 0)) return common::InvalidArgument(where + ": slowdown must be positive or -1");
      b.Pairs("coscheml")[{i, b.AddApp(bg)}] = s == -1 ? kInfeasible : s;
    }
  }
  const std::string util_path = dir + "/gpu_util_12apps.json";
  if (std::filesystem::exists(util_path)) {
    GPUSCHED_ASSIGN_OR_RETURN(u, ReadJson(util_path));
    if (!u.is_object()) return common::InvalidArgument(util_path + ": expected {app: utilisation %}");
    for (const auto& [app, v] : u.items()) {
      if (!v.is_number() || v.get<double>() < 0 || v.get<double>() > 100) {
        return common::InvalidArgument(fmt::format("{}: [{}] is not a percentage", util_path, app));
      }
      b.AppRef(b.AddApp(app)).gpu_util = v.get<double>();
    }
  }
  Dataset d = b.Finish();
  for (App& a : d.apps) a.family = CoschemlFamily(a.name);
  return d;
}

common::Result<Dataset> LoadPairsCsv(const std::string& csv_path) {
  GPUSCHED_ASSIGN_OR_RETURN(text, ReadAll(csv_path));
  return ParsePairsCsv(text, csv_path);
}

common::Result<Dataset> ParsePairsCsv(std::string_view text, const std::string& csv_path) {
  std::istringstream in{std::string(text)};
  std::string line;
  if (!std::getline(in, line)) return common::InvalidArgument(csv_path + ": empty (expected a header line)");
  const std::vector<std::string> header = SplitCsvLine(line);
  auto col = [&](std::initializer_list<const char*> names) -> int {
    for (const char* n : names) {
      for (size_t i = 0; i < header.size(); ++i) {
        if (header[i] == n) return static_cast<int>(i);
      }
    }
    return -1;
  };
  const int c_gpu = col({"gpu"});
  const int c_a = col({"app_a", "job_a"});
  const int c_b = col({"app_b", "job_b"});
  const int c_sa = col({"slowdown_a"});
  const int c_sb = col({"slowdown_b"});
  const int c_scale_a = col({"scale_a"});
  const int c_scale_b = col({"scale_b"});
  const int c_iso_a = col({"iso_tput_a"});
  const int c_iso_b = col({"iso_tput_b"});
  const int c_util_a = col({"gpu_util_a"});
  const int c_util_b = col({"gpu_util_b"});
  for (const auto& [c, name] :
       {std::pair{c_gpu, "gpu"}, {c_a, "app_a"}, {c_b, "app_b"}, {c_sa, "slowdown_a"}, {c_sb, "slowdown_b"}}) {
    if (c < 0) return common::InvalidArgument(fmt::format("{}: header has no {:?} column", csv_path, name));
  }
  Builder b(csv_path);
  size_t lineno = 1;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line == "\r") continue;
    const std::vector<std::string> f = SplitCsvLine(line);
    const std::string where = fmt::format("{}:{}", csv_path, lineno);
    if (f.size() != header.size()) {
      return common::InvalidArgument(fmt::format("{}: {} fields, the header has {}", where, f.size(), header.size()));
    }
    auto at = [&](int c) -> const std::string& { return f[static_cast<size_t>(c)]; };
    if ((c_scale_a >= 0 && at(c_scale_a) != "1") || (c_scale_b >= 0 && at(c_scale_b) != "1")) continue;
    if (at(c_gpu).empty() || at(c_a).empty() || at(c_b).empty()) {
      return common::InvalidArgument(where + ": gpu, app_a and app_b must not be empty");
    }
    const std::string& gpu = at(c_gpu);
    b.Gpu(gpu);
    const size_t ia = b.AddApp(at(c_a));
    const size_t ib = b.AddApp(at(c_b));
    GPUSCHED_ASSIGN_OR_RETURN(sa, ParseSlowdownField(at(c_sa), where + " slowdown_a"));
    GPUSCHED_ASSIGN_OR_RETURN(sb, ParseSlowdownField(at(c_sb), where + " slowdown_b"));
    // Gavel's flat file leaves both slowdowns empty for a pair that could not run.
    const bool fits = sa.has_value() && sb.has_value();
    if (sa.has_value() != sb.has_value()) {
      return common::InvalidArgument(where + ": a pair either fits (both slowdowns) or does not (both empty)");
    }
    GPUSCHED_RETURN_IF_ERROR(SetPair(b.Pairs(gpu), ia, ib, fits ? *sa : kInfeasible, where));
    GPUSCHED_RETURN_IF_ERROR(SetPair(b.Pairs(gpu), ib, ia, fits ? *sb : kInfeasible, where));
    for (const auto& [c, idx] : {std::pair{c_iso_a, ia}, {c_iso_b, ib}}) {
      if (c < 0 || at(c).empty()) continue;
      GPUSCHED_ASSIGN_OR_RETURN(v, ParseNumberField(at(c), where, "isolated throughput"));
      b.Iso(gpu)[idx] = v;
    }
    for (const auto& [c, idx] : {std::pair{c_util_a, ia}, {c_util_b, ib}}) {
      if (c < 0 || at(c).empty()) continue;
      GPUSCHED_ASSIGN_OR_RETURN(v, ParseNumberField(at(c), where, "GPU utilisation"));
      if (v > 100) return common::InvalidArgument(where + ": GPU utilisation above 100%");
      b.AppRef(idx).gpu_util = v;
    }
  }
  Dataset d = b.Finish();
  if (d.apps.empty()) return common::InvalidArgument(csv_path + ": no measured pairs");
  return d;
}

common::Result<std::vector<Dataset>> LoadDataDir(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) return common::NotFound(dir + ": not a directory");
  std::vector<Dataset> out;
  const std::string gavel = dir + "/gavel/simulation_throughputs.json";
  if (fs::exists(gavel)) {
    GPUSCHED_ASSIGN_OR_RETURN(d, LoadGavel(gavel));
    d.source = "gavel";
    out.push_back(std::move(d));
  }
  if (fs::exists(dir + "/coscheml/interference_12apps.json")) {
    GPUSCHED_ASSIGN_OR_RETURN(d, LoadCoscheml(dir + "/coscheml"));
    d.source = "coscheml";
    out.push_back(std::move(d));
  }
  std::vector<std::string> csvs;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".csv") csvs.push_back(e.path().string());
  }
  std::sort(csvs.begin(), csvs.end());
  for (const std::string& c : csvs) {
    GPUSCHED_ASSIGN_OR_RETURN(d, LoadPairsCsv(c));
    out.push_back(std::move(d));
  }
  if (out.empty()) {
    return common::NotFound(dir +
                            ": no gavel/simulation_throughputs.json, coscheml/interference_12apps.json or *.csv in it");
  }
  return out;
}

common::Status WritePairsCsv(const Dataset& data, const std::string& csv_path) {
  std::ofstream out(csv_path);
  if (!out) return common::Unavailable(csv_path + ": cannot write");
  out << "gpu,app_a,app_b,slowdown_a,slowdown_b,iso_tput_a,iso_tput_b,gpu_util_a,gpu_util_b\n";
  const size_t n = data.size();
  auto num = [](double v) { return std::isnan(v) || v < 0 ? std::string() : fmt::format("{}", v); };
  auto quote = [](const std::string& s) {
    if (s.find_first_of(",\"") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  for (const GpuTable& t : data.gpus) {
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = i; j < n; ++j) {
        const double a = data.At(t, i, j);
        const double b = data.At(t, j, i);
        if (std::isnan(a) || std::isnan(b)) continue;
        const bool fits = a > 0 && b > 0;
        out << quote(t.gpu) << ',' << quote(data.apps[i].name) << ',' << quote(data.apps[j].name) << ','
            << (fits ? num(a) : "inf") << ',' << (fits ? num(b) : "inf") << ',' << num(t.iso[i]) << ',' << num(t.iso[j])
            << ',' << num(data.apps[i].gpu_util) << ',' << num(data.apps[j].gpu_util) << '\n';
      }
    }
  }
  out.flush();
  if (!out) return common::Unavailable(csv_path + ": write failed");
  return common::Status::Ok();
}

}  // namespace gpusched::interference
