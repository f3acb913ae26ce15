#include "gpusched/interference/slowdown_models.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fmt/format.h"

namespace gpusched::interference {
namespace {

constexpr int kModelFormat = 1;

double Median(std::vector<double> v, double otherwise) {
  if (v.empty()) return otherwise;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
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

std::unique_ptr<TableSlowdown> HeldOutSlowdown(const Dataset& data, size_t table,
                                               const HeldOutPredictions& predictions) {
  const size_t n = data.size();
  TableSlowdown::Table t;
  t.gpu = data.gpus[table].gpu;
  t.incoming = predictions.incoming;
  t.resident = predictions.resident;
  for (size_t k = 0; k < n * n; ++k) {
    if (!predictions.feasible[k]) t.incoming[k] = t.resident[k] = kInfeasible;
  }
  std::vector<std::string> names;
  for (const App& a : data.apps) names.push_back(a.name);
  return std::make_unique<TableSlowdown>(std::move(names), std::vector<TableSlowdown::Table>{std::move(t)},
                                         fmt::format("leave-one-out predictions {} {}", data.source, t.gpu));
}

common::Result<TrainedModel> TrainedModel::Train(std::vector<Dataset> data, const ModelOptions& options) {
  TrainedModel m;
  m.options = options;
  for (Dataset& d : data) {
    Entry e;
    for (size_t t = 0; t < d.gpus.size(); ++t) {
      Fold fold;
      fold.train_tables = {t};
      fold.train_app = d.MeasuredApps(d.gpus[t]);  // every application with measured pairs on this table
      auto learner = PairLearner::Train(d, fold, options);
      if (!learner.ok()) {
        return common::Status(learner.status().code(),
                              fmt::format("{} [{}]: {}", d.source, d.gpus[t].gpu, learner.status().message()));
      }
      e.learners.push_back(std::move(*learner));
    }
    e.data = std::move(d);
    m.entries.push_back(std::move(e));
  }
  return m;
}

common::Status TrainedModel::Save(const std::string& path) const {
  nlohmann::json j;
  j["format"] = kModelFormat;
  j["kind"] = "gpusched-interference-model";
  j["entries"] = nlohmann::json::array();
  for (const Entry& e : entries) {
    nlohmann::json je;
    je["source"] = e.data.source;
    je["apps"] = nlohmann::json::array();
    for (const App& a : e.data.apps) {
      je["apps"].push_back(
          {{"name", a.name}, {"family", a.family}, {"batch_size", a.batch_size}, {"gpu_util", a.gpu_util}});
    }
    je["tables"] = nlohmann::json::array();
    for (size_t t = 0; t < e.data.gpus.size(); ++t) {
      const GpuTable& g = e.data.gpus[t];
      nlohmann::json jt;
      jt["gpu"] = g.gpu;
      // NaN is not JSON: -1 = not measured, 0 = does not fit.
      std::vector<double> iso, s;
      for (double v : g.iso) iso.push_back(std::isnan(v) ? -1 : v);
      for (double v : g.slowdown) s.push_back(std::isnan(v) ? -1 : v);
      jt["iso"] = iso;
      jt["slowdown"] = s;
      GPUSCHED_ASSIGN_OR_RETURN(learner, e.learners[t].Save());
      jt["learner"] = nlohmann::json::parse(learner);
      je["tables"].push_back(std::move(jt));
    }
    j["entries"].push_back(std::move(je));
  }
  std::ofstream out(path);
  if (!out) return common::Unavailable(path + ": cannot write");
  out << j.dump();
  out.flush();
  if (!out) return common::Unavailable(path + ": write failed");
  return common::Status::Ok();
}

common::Result<TrainedModel> TrainedModel::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return common::NotFound(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return common::InvalidArgument(path + ": not a JSON object");
  if (j.value("kind", "") != "gpusched-interference-model" || j.value("format", 0) != kModelFormat) {
    return common::InvalidArgument(
        fmt::format("{}: not a gpusched interference model of format {} (train one with "
                    "`gpusched interference train`)",
                    path, kModelFormat));
  }
  try {
    TrainedModel m;
    for (const auto& je : j.at("entries")) {
      Entry e;
      e.data.source = je.at("source").get<std::string>();
      for (const auto& ja : je.at("apps")) {
        App a;
        a.name = ja.at("name").get<std::string>();
        a.family = ja.at("family").get<std::string>();
        a.batch_size = ja.at("batch_size").get<double>();
        a.gpu_util = ja.at("gpu_util").get<double>();
        e.data.apps.push_back(std::move(a));
      }
      const size_t n = e.data.apps.size();
      for (const auto& jt : je.at("tables")) {
        GpuTable g;
        g.gpu = jt.at("gpu").get<std::string>();
        for (double v : jt.at("iso").get<std::vector<double>>()) g.iso.push_back(v < 0 ? std::nan("") : v);
        for (double v : jt.at("slowdown").get<std::vector<double>>()) {
          g.slowdown.push_back(v < 0 ? std::nan("") : v);
        }
        if (g.iso.size() != n || g.slowdown.size() != n * n) {
          return common::InvalidArgument(fmt::format("{}: table {} does not match {} applications", path, g.gpu, n));
        }
        GPUSCHED_ASSIGN_OR_RETURN(learner, PairLearner::Load(jt.at("learner").dump()));
        e.data.gpus.push_back(std::move(g));
        e.learners.push_back(std::move(learner));
      }
      m.entries.push_back(std::move(e));
    }
    if (m.entries.empty()) return common::InvalidArgument(path + ": the model holds no data set");
    return m;
  } catch (const nlohmann::json::exception& e) {
    return common::InvalidArgument(fmt::format("{}: {}", path, e.what()));
  }
}

common::Result<std::unique_ptr<TableSlowdown>> TrainedModel::Serve() const {
  // One application list over every entry; each table fills the rows and columns of its own entry's applications.
  std::vector<std::string> names;
  std::unordered_map<std::string, size_t> index;
  for (const Entry& e : entries) {
    for (const App& a : e.data.apps) {
      if (index.emplace(a.name, names.size()).second) names.push_back(a.name);
    }
  }
  const size_t total = names.size();
  std::vector<TableSlowdown::Table> tables;
  for (const Entry& e : entries) {
    const size_t n = e.data.size();
    std::vector<size_t> global(n);
    for (size_t i = 0; i < n; ++i) global[i] = index.at(e.data.apps[i].name);
    for (size_t t = 0; t < e.data.gpus.size(); ++t) {
      const GpuTable& g = e.data.gpus[t];
      TableSlowdown::Table out;
      out.gpu = g.gpu;
      out.incoming.assign(total * total, std::nan(""));
      out.resident.assign(total * total, std::nan(""));
      // Pairs not measured, among applications the learner has features for (measured on this table).
      const std::vector<bool> known = e.data.MeasuredApps(g);
      std::vector<std::pair<size_t, size_t>> missing;
      for (size_t i = 0; i < n; ++i) {
        for (size_t k = 0; k < n; ++k) {
          if (!Dataset::Measured(e.data.At(g, i, k)) && known[i] && known[k]) missing.emplace_back(i, k);
        }
      }
      std::vector<double> s = g.slowdown;
      if (!missing.empty()) {
        GPUSCHED_ASSIGN_OR_RETURN(pred, e.learners[t].Predict(e.data, t, missing));
        for (size_t q = 0; q < missing.size(); ++q) {
          s[missing[q].first * n + missing[q].second] = pred.feasible[q] ? pred.slowdown[q] : kInfeasible;
        }
      }
      for (size_t i = 0; i < n; ++i) {
        for (size_t k = 0; k < n; ++k) {
          out.incoming[global[i] * total + global[k]] = s[i * n + k];
          out.resident[global[i] * total + global[k]] = s[k * n + i];
        }
      }
      tables.push_back(std::move(out));
    }
  }
  if (tables.empty()) return common::InvalidArgument("the model holds no GPU table");
  std::string desc = fmt::format("interference model, {} applications, GPU tables", total);
  for (const auto& t : tables) desc += " " + t.gpu;
  return std::make_unique<TableSlowdown>(std::move(names), std::move(tables), std::move(desc));
}

}  // namespace gpusched::interference
