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
  j["kind"] = kModelKind;
  // What the daemons load (table_slowdown.h): the tables Serve() fills, so they never run the learner.
  GPUSCHED_ASSIGN_OR_RETURN(served, Serve());
  j["served"] = nlohmann::json::parse(ServedTablesJson(*served));
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
  // Format 1 (0.1.0) holds the same learners without the served tables; both are read here.
  const int format = j.value("format", 0);
  if (j.value("kind", "") != kModelKind || (format != 1 && format != kModelFormat)) {
    return common::InvalidArgument(
        fmt::format("{}: not a gpusched-lab interference model of format 1 or {} (train one with "
                    "`gpusched-lab interference train`)",
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
