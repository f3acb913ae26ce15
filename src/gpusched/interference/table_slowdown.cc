#include "gpusched/interference/table_slowdown.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fmt/format.h"

namespace gpusched::interference {
namespace {

double Median(std::vector<double> v, double otherwise) {
  if (v.empty()) return otherwise;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

nlohmann::json Values(const std::vector<double>& v) {
  nlohmann::json out = nlohmann::json::array();
  for (double x : v) {
    if (std::isnan(x)) {
      out.push_back(nullptr);
    } else {
      out.push_back(x);
    }
  }
  return out;
}

// n × n values: numbers >= 0 or null.
common::Result<std::vector<double>> ReadValues(const nlohmann::json& j, size_t n, const std::string& what) {
  if (!j.is_array() || j.size() != n * n) {
    return common::InvalidArgument(
        fmt::format("{}: want an array of {} values ({} applications squared)", what, n * n, n));
  }
  std::vector<double> out;
  out.reserve(n * n);
  for (const auto& v : j) {
    if (v.is_null()) {
      out.push_back(std::nan(""));
    } else if (v.is_number() && v.get<double>() >= 0 && std::isfinite(v.get<double>())) {
      out.push_back(v.get<double>());
    } else {
      return common::InvalidArgument(fmt::format("{}: {} is not a slowdown (a number >= 0, or null)", what, v.dump()));
    }
  }
  return out;
}

}  // namespace

std::string NormalizeName(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c)) != 0) {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

TableSlowdown::TableSlowdown(std::vector<std::string> apps, std::vector<Table> tables, std::string description,
                             std::string default_gpu)
    : apps_(std::move(apps)), tables_(std::move(tables)), description_(std::move(description)) {
  for (size_t i = 0; i < apps_.size(); ++i) {
    exact_.emplace(apps_[i], i);
    normalized_.emplace(NormalizeName(apps_[i]), i);
  }
  for (size_t t = 0; t < tables_.size(); ++t) {
    table_keys_.push_back(NormalizeName(tables_[t].gpu));
    if (!default_gpu.empty() && tables_[t].gpu == default_gpu) default_table_ = t;
  }
  const size_t n = apps_.size();
  for (const Table& t : tables_) {
    Prior p;
    std::vector<double> all;
    p.hit_by.assign(n, std::nan(""));
    p.hurt_by.assign(n, std::nan(""));
    for (size_t j = 0; j < n; ++j) {
      std::vector<double> col, row;
      for (size_t i = 0; i < n; ++i) {
        const double a = t.incoming[i * n + j];  // s(i | j)
        const double b = t.incoming[j * n + i];  // s(j | i)
        if (Dataset::Fits(a)) {
          col.push_back(a);
          all.push_back(a);
        }
        if (Dataset::Fits(b)) row.push_back(b);
      }
      p.hit_by[j] = Median(col, std::nan(""));
      p.hurt_by[j] = Median(row, std::nan(""));
    }
    p.overall = Median(all, 1.5);
    priors_.push_back(std::move(p));
  }
}

std::optional<size_t> TableSlowdown::Index(std::string_view app) const {
  if (auto it = exact_.find(std::string(app)); it != exact_.end()) return it->second;
  if (auto it = normalized_.find(NormalizeName(app)); it != normalized_.end()) return it->second;
  return std::nullopt;
}

const TableSlowdown::Table& TableSlowdown::TableFor(std::string_view gpu) const {
  const std::string g = NormalizeName(gpu);
  for (size_t t = 0; t < tables_.size(); ++t) {
    if (table_keys_[t] == g) return tables_[t];
  }
  for (size_t t = 0; t < tables_.size(); ++t) {
    if (!table_keys_[t].empty() && g.find(table_keys_[t]) != std::string::npos) return tables_[t];
  }
  return tables_[default_table_];
}

bool TableSlowdown::Knows(std::string_view app, std::string_view gpu) const {
  if (tables_.empty()) return false;
  const auto i = Index(app);
  if (!i) return false;
  const Table& t = TableFor(gpu);
  const size_t n = apps_.size();
  for (size_t j = 0; j < n; ++j) {
    if (Dataset::Measured(t.incoming[*i * n + j])) return true;
  }
  return false;
}

ports::PairSlowdown TableSlowdown::Pair(std::string_view incoming, std::string_view resident,
                                        std::string_view gpu) const {
  ports::PairSlowdown out;
  if (tables_.empty()) return out;
  const Table& t = TableFor(gpu);
  const Prior& p = priors_[static_cast<size_t>(&t - tables_.data())];
  const size_t n = apps_.size();
  const auto i = Index(incoming);
  const auto j = Index(resident);
  double a = std::nan(""), b = std::nan("");
  if (i && j) {
    a = t.incoming[*i * n + *j];
    b = t.resident[*i * n + *j];
    if ((Dataset::Measured(a) && !Dataset::Fits(a)) || (Dataset::Measured(b) && !Dataset::Fits(b))) {
      out.feasible = false;
      return out;
    }
  }
  // Whatever is still unknown comes from the prior.
  if (!Dataset::Fits(a)) a = j && !std::isnan(p.hit_by[*j]) ? p.hit_by[*j] : p.overall;
  if (!Dataset::Fits(b)) b = j && !std::isnan(p.hurt_by[*j]) ? p.hurt_by[*j] : p.overall;
  out.incoming = a;
  out.resident = b;
  return out;
}

std::unique_ptr<TableSlowdown> MeasuredSlowdown(const Dataset& data) {
  const size_t n = data.size();
  std::vector<TableSlowdown::Table> tables;
  for (const GpuTable& g : data.gpus) {
    TableSlowdown::Table t;
    t.gpu = g.gpu;
    t.incoming = g.slowdown;
    t.resident.assign(n * n, std::nan(""));
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) t.resident[i * n + j] = g.slowdown[j * n + i];
    }
    tables.push_back(std::move(t));
  }
  std::vector<std::string> names;
  for (const App& a : data.apps) names.push_back(a.name);
  return std::make_unique<TableSlowdown>(std::move(names), std::move(tables),
                                         fmt::format("measured {} ({} apps)", data.source, n));
}

std::string ServedTablesJson(const TableSlowdown& model) {
  nlohmann::json j;
  j["apps"] = model.apps();
  j["description"] = model.Describe();
  j["tables"] = nlohmann::json::array();
  for (const TableSlowdown::Table& t : model.tables()) {
    j["tables"].push_back({{"gpu", t.gpu}, {"incoming", Values(t.incoming)}, {"resident", Values(t.resident)}});
  }
  return j.dump();
}

common::Result<std::unique_ptr<TableSlowdown>> ParseServedModel(std::string_view text, const std::string& source) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return common::InvalidArgument(source + ": not a JSON object");
  if (j.value("kind", "") != kModelKind) {
    return common::InvalidArgument(source +
                                   ": not a gpusched-lab interference model (train one with "
                                   "`gpusched-lab interference train`)");
  }
  const int format = j.contains("format") && j["format"].is_number_integer() ? j["format"].get<int>() : 0;
  if (format != kModelFormat) {
    return common::InvalidArgument(
        fmt::format("{}: model format {}, this release serves format {} (a model trained by 0.1.0 holds no serving "
                    "tables: train it again with `gpusched-lab interference train`)",
                    source, format, kModelFormat));
  }
  if (!j.contains("served") || !j["served"].is_object()) {
    return common::InvalidArgument(source + ": the model has no \"served\" tables");
  }
  const nlohmann::json& s = j["served"];
  std::vector<std::string> apps;
  if (!s.contains("apps") || !s["apps"].is_array()) return common::InvalidArgument(source + ": served.apps missing");
  for (const auto& a : s["apps"]) {
    if (!a.is_string()) return common::InvalidArgument(source + ": served.apps holds a non-string " + a.dump());
    apps.push_back(a.get<std::string>());
  }
  const size_t n = apps.size();
  if (!s.contains("tables") || !s["tables"].is_array() || s["tables"].empty()) {
    return common::InvalidArgument(source + ": served.tables missing or empty");
  }
  std::vector<TableSlowdown::Table> tables;
  for (size_t t = 0; t < s["tables"].size(); ++t) {
    const nlohmann::json& jt = s["tables"][t];
    const std::string what = fmt::format("{}: served.tables[{}]", source, t);
    if (!jt.is_object() || !jt.contains("gpu") || !jt["gpu"].is_string()) {
      return common::InvalidArgument(what + ": want an object with a string \"gpu\"");
    }
    TableSlowdown::Table table;
    table.gpu = jt["gpu"].get<std::string>();
    GPUSCHED_ASSIGN_OR_RETURN(incoming, ReadValues(jt.value("incoming", nlohmann::json()), n, what + ".incoming"));
    GPUSCHED_ASSIGN_OR_RETURN(resident, ReadValues(jt.value("resident", nlohmann::json()), n, what + ".resident"));
    table.incoming = std::move(incoming);
    table.resident = std::move(resident);
    tables.push_back(std::move(table));
  }
  std::string description = s.contains("description") && s["description"].is_string()
                                ? s["description"].get<std::string>()
                                : fmt::format("interference model, {} applications", n);
  return std::make_unique<TableSlowdown>(std::move(apps), std::move(tables), std::move(description));
}

common::Result<std::unique_ptr<TableSlowdown>> LoadServedModel(const std::string& path) {
  std::ifstream in(path);
  if (!in) return common::NotFound(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseServedModel(ss.str(), path);
}

}  // namespace gpusched::interference
