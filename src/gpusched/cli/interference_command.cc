#include "gpusched/cli/interference_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "fmt/format.h"
#include "gpusched/interference/dataset.h"
#include "gpusched/interference/eval.h"
#include "gpusched/interference/slowdown_models.h"

namespace gpusched::cli {
namespace {

interference::ModelOptions Options(const InterferenceFlags& f) {
  interference::ModelOptions o;
  o.references = f.references;
  o.ridge_weight = f.ridge_weight;
  o.ridge_lambda = f.ridge_lambda;
  o.trees.rounds = f.trees;
  o.trees.max_depth = f.depth;
  return o;
}

void AddModelFlags(CLI::App* c, InterferenceFlags& f) {
  c->add_option("--data", f.data,
                "Folder of co-location measurements (gavel/, coscheml/, *.csv; docs/interference.md says how it is "
                "laid out and where to download Gavel's and Co-scheML's)")
      ->required();
  c->add_option("--references", f.references, "Reference applications each one is fingerprinted against")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  c->add_option("--ridge-weight", f.ridge_weight, "Weight of the per-partner ridge vs the trees (0..1)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  c->add_option("--ridge-lambda", f.ridge_lambda, "L2 penalty of the ridge regressions")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_option("--trees", f.trees, "Boosting rounds")->capture_default_str()->check(CLI::Range(1, 100000));
  c->add_option("--depth", f.depth, "Tree depth")->capture_default_str()->check(CLI::Range(1, 16));
}

int RunEval(const InterferenceFlags& f) {
  auto data = interference::LoadDataDir(f.data);
  if (!data.ok()) {
    std::fprintf(stderr, "gpusched-lab interference eval: %s\n", data.status().ToString().c_str());
    return 2;
  }
  interference::EvalOptions eo;
  eo.model = Options(f);
  eo.gpus = f.gpus;
  if (!f.splits.empty()) eo.splits = f.splits;
  std::vector<interference::EvalRow> rows;
  const auto start = std::chrono::steady_clock::now();
  for (const interference::Dataset& d : *data) {
    auto r = interference::Evaluate(d, eo);
    if (!r.ok()) {
      std::fprintf(stderr, "gpusched-lab interference eval: %s\n", r.status().ToString().c_str());
      return 1;
    }
    rows.insert(rows.end(), r->begin(), r->end());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s", interference::FormatEvalTable(rows).c_str());
  std::printf(
      "(model: %d references, ridge weight %.2f, %d trees of depth %d; b.* = 3-NN baseline; mae-nr = "
      "without profiled pairs; infeas = pairs that do not fit, flagged/all; %.1f s)\n",
      f.references, f.ridge_weight, f.trees, f.depth, secs);
  std::printf("%s", interference::FormatResultLines(rows).c_str());
  return 0;
}

int RunTrain(const InterferenceFlags& f) {
  auto data = interference::LoadDataDir(f.data);
  if (!data.ok()) {
    std::fprintf(stderr, "gpusched-lab interference train: %s\n", data.status().ToString().c_str());
    return 2;
  }
  size_t apps = 0, tables = 0;
  for (const auto& d : *data) {
    apps += d.size();
    tables += d.gpus.size();
  }
  auto model = interference::TrainedModel::Train(std::move(*data), Options(f));
  if (!model.ok()) {
    std::fprintf(stderr, "gpusched-lab interference train: %s\n", model.status().ToString().c_str());
    return 1;
  }
  if (auto s = model->Save(f.model); !s.ok()) {
    std::fprintf(stderr, "gpusched-lab interference train: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("trained on %zu applications, %zu GPU tables; wrote %s\n", apps, tables, f.model.c_str());
  return 0;
}

int RunPredict(const InterferenceFlags& f) {
  auto model = interference::TrainedModel::Load(f.model);
  if (!model.ok()) {
    std::fprintf(stderr, "gpusched-lab interference predict: %s\n", model.status().ToString().c_str());
    return 2;
  }
  auto serve = model->Serve();
  if (!serve.ok()) {
    std::fprintf(stderr, "gpusched-lab interference predict: %s\n", serve.status().ToString().c_str());
    return 1;
  }
  const interference::TableSlowdown& m = **serve;
  std::vector<std::string> partners = f.with;
  if (partners.empty()) partners = m.apps();
  struct Row {
    std::string b;
    ports::PairSlowdown p;
  };
  std::vector<Row> rows;
  for (const std::string& b : partners) rows.push_back({b, m.Pair(f.app, b, f.gpu)});
  std::stable_sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) {
    if (x.p.feasible != y.p.feasible) return x.p.feasible;
    return x.p.incoming + x.p.resident < y.p.incoming + y.p.resident;
  });
  std::printf("%s on %s%s (%s)\n", f.app.c_str(), f.gpu.c_str(),
              m.Knows(f.app, f.gpu) ? "" : " — unknown application: prior", m.Describe().c_str());
  std::printf("%-36s %10s %10s %8s\n", "next to", "s(app|B)", "s(B|app)", "sum");
  for (const Row& r : rows) {
    if (!r.p.feasible) {
      std::printf("%-36s %10s %10s %8s\n", r.b.c_str(), "-", "-", "no fit");
    } else {
      std::printf("%-36s %10.3f %10.3f %8.3f%s\n", r.b.c_str(), r.p.incoming, r.p.resident, r.p.incoming + r.p.resident,
                  m.Knows(r.b, f.gpu) ? "" : "  (prior)");
    }
  }
  return 0;
}

}  // namespace

void AddInterferenceCommand(CLI::App& app, InterferenceFlags& flags, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "interference", "Slowdown model from co-location measurements: train, eval (validation protocol), predict");
  cmd->require_subcommand(1);
  CLI::App* eval = cmd->add_subcommand("eval", "Run the validation protocol; print the table and RESULT lines");
  AddModelFlags(eval, flags);
  eval->add_option("--gpu", flags.gpus, "GPU tables to evaluate (default: all)");
  eval->add_option("--split", flags.splits, "Splits: loao, lofo, cross (default: all)")
      ->check(CLI::IsMember({"loao", "lofo", "cross"}));
  eval->callback([&] { exit_code = RunEval(flags); });
  CLI::App* train = cmd->add_subcommand("train", "Train on every measurement and save the model file");
  AddModelFlags(train, flags);
  train->add_option("--out", flags.model, "Model file to write")->capture_default_str();
  train->callback([&] { exit_code = RunTrain(flags); });
  CLI::App* predict = cmd->add_subcommand("predict", "Predicted slowdowns of an application next to others");
  predict->add_option("--model", flags.model, "Model file from `train`")->capture_default_str();
  predict->add_option("--app", flags.app, "The incoming application")->required();
  predict->add_option("--with", flags.with, "Residents to pair it with (default: every known application)");
  predict->add_option("--gpu", flags.gpu, "GPU type or model string")->capture_default_str();
  predict->callback([&] { exit_code = RunPredict(flags); });
}

}  // namespace gpusched::cli
