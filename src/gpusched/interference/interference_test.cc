#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "gpusched/interference/dataset.h"
#include "gpusched/interference/eval.h"
#include "gpusched/interference/learner.h"
#include "gpusched/interference/slowdown_models.h"

namespace gpusched::interference {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("gpusched-interference-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string File(const std::string& name, const std::string& text) const {
    const std::string p = (path_ / name).string();
    fs::create_directories(fs::path(p).parent_path());
    std::ofstream(p) << text;
    return p;
  }
  [[nodiscard]] std::string path() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

// A synthetic data set with structure a model can learn: each application has a "pressure" p it puts on a
// shared GPU and a "sensitivity" q to pressure, s(a | b) = 1 + q_a · p_b (+ a little noise), isolated throughput
// tied to p. Families group applications with similar (p, q); the heaviest pair does not fit.
Dataset Synthetic(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> noise(0, 0.01);
  Dataset d;
  d.source = "synthetic";
  std::vector<double> p(static_cast<size_t>(n)), q(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    App a;
    const int fam = i % 4;
    a.family = "family" + std::to_string(fam);
    a.name = a.family + "-" + std::to_string(i);
    a.batch_size = 16 << (i % 3);
    d.apps.push_back(a);
    p[static_cast<size_t>(i)] = 0.2 * fam + 0.15 * u(rng);
    q[static_cast<size_t>(i)] = 1.0 - 0.2 * fam + 0.15 * u(rng);
  }
  GpuTable t;
  t.gpu = "p100";
  const size_t nn = static_cast<size_t>(n);
  t.iso.resize(nn);
  t.slowdown.resize(nn * nn);
  for (size_t i = 0; i < nn; ++i) {
    t.iso[i] = 100.0 / (1 + p[i]);
    for (size_t j = 0; j < nn; ++j) t.slowdown[i * nn + j] = 1 + q[i] * p[j] + std::abs(noise(rng));
  }
  // The two heaviest applications do not fit together.
  t.slowdown[(nn - 1) * nn + (nn - 2)] = kInfeasible;
  t.slowdown[(nn - 2) * nn + (nn - 1)] = kInfeasible;
  d.gpus.push_back(std::move(t));
  return d;
}

ModelOptions FastOptions() {
  ModelOptions o;
  o.references = 4;
  o.trees.rounds = 60;
  return o;
}

TEST(AppNameTest, FamilyAndBatchSizeFromTheName) {
  const App a = ParseAppName("ResNet-50 (batch size 64)");
  EXPECT_EQ(a.family, "ResNet-50");
  EXPECT_EQ(a.batch_size, 64);
  const App b = ParseAppName("A3C");
  EXPECT_EQ(b.family, "A3C");
  EXPECT_EQ(b.batch_size, 0);
  EXPECT_EQ(ParseAppName("odd (batch size x)").family, "odd (batch size x)");
}

TEST(DatasetTest, GavelJsonTurnsThroughputsIntoSlowdowns) {
  TempDir dir;
  const std::string path = dir.File("g.json", R"js({
    "p100": {
      "('A (batch size 16)', 1)": {"null": 10.0, "('A (batch size 16)', 1)": [5.0, 5.0], "('B', 1)": [8.0, 1.0]},
      "('B', 1)": {"null": 2.0, "('A (batch size 16)', 1)": [1.0, 8.0], "('B', 1)": [0, 0]},
      "('A (batch size 16)', 2)": {"null": 18.0, "('A (batch size 16)', 2)": [9.0, 9.0]}
    },
    "v100_unconsolidated": {"('A (batch size 16)', 1)": {"null": 1.0}}
  })js");
  auto d = LoadGavel(path);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ(d->size(), 2u);
  ASSERT_EQ(d->gpus.size(), 1u);
  const GpuTable& t = d->gpus[0];
  const size_t a = *d->AppIndex("A (batch size 16)");
  const size_t b = *d->AppIndex("B");
  EXPECT_DOUBLE_EQ(d->At(t, a, a), 2.0);
  EXPECT_DOUBLE_EQ(d->At(t, a, b), 10.0 / 8.0);
  EXPECT_DOUBLE_EQ(d->At(t, b, a), 2.0 / 1.0);
  EXPECT_EQ(d->At(t, b, b), kInfeasible);
  EXPECT_EQ(d->apps[a].family, "A");
  EXPECT_EQ(d->apps[a].batch_size, 16);
}

TEST(DatasetTest, GavelErrorsNameTheKey) {
  TempDir dir;
  auto d = LoadGavel(dir.File("g.json", R"js({"p100": {"A": {"null": 1}}})js"));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("[p100][A]"), std::string::npos) << d.status().message();
  auto e = LoadGavel(dir.File("h.json", R"js({"p100": {"('A', 1)": {"null": -1}}})js"));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("isolated throughput"), std::string::npos) << e.status().message();
  EXPECT_FALSE(LoadGavel(dir.path() + "/missing.json").ok());
}

TEST(DatasetTest, CoschemlTableAndUtilisation) {
  TempDir dir;
  dir.File("c/interference_12apps.json",
           R"js({"LAMMPS": {"LAMMPS": -1, "CNN": 1.1}, "CNN": {"LAMMPS": 1.3, "CNN": 1.9}})js");
  dir.File("c/gpu_util_12apps.json", R"js({"LAMMPS": 25, "CNN": 92.02})js");
  auto d = LoadCoscheml(dir.path() + "/c");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  const GpuTable& t = d->gpus[0];
  EXPECT_EQ(t.gpu, "coscheml");
  const size_t l = *d->AppIndex("LAMMPS"), c = *d->AppIndex("CNN");
  EXPECT_EQ(d->At(t, l, l), kInfeasible);
  EXPECT_DOUBLE_EQ(d->At(t, c, l), 1.3);
  EXPECT_DOUBLE_EQ(d->apps[c].gpu_util, 92.02);
  EXPECT_EQ(d->apps[l].family, "HPC");
  EXPECT_EQ(d->apps[c].family, "DL-train");
}

TEST(DatasetTest, CoschemlErrorsNameTheKey) {
  TempDir dir;
  dir.File("a/interference_12apps.json", R"js({"LAMMPS": {"CNN": "fast"}})js");
  auto bad_value = LoadCoscheml(dir.path() + "/a");
  ASSERT_FALSE(bad_value.ok());
  EXPECT_NE(bad_value.status().message().find("[LAMMPS][CNN]"), std::string::npos) << bad_value.status().message();
  dir.File("b/interference_12apps.json", R"js({"LAMMPS": {"CNN": -3}})js");
  EXPECT_FALSE(LoadCoscheml(dir.path() + "/b").ok());
  dir.File("c/interference_12apps.json", R"js({"LAMMPS": {"CNN": 1.2}})js");
  dir.File("c/gpu_util_12apps.json", R"js({"LAMMPS": 140})js");
  auto bad_util = LoadCoscheml(dir.path() + "/c");
  ASSERT_FALSE(bad_util.ok());
  EXPECT_NE(bad_util.status().message().find("[LAMMPS] is not a percentage"), std::string::npos);
  EXPECT_FALSE(LoadCoscheml(dir.path() + "/missing").ok());
}

TEST(DatasetTest, OwnCsvRoundTrips) {
  TempDir dir;
  const Dataset d = Synthetic(6, 1);
  const std::string path = dir.path() + "/pairs.csv";
  ASSERT_TRUE(WritePairsCsv(d, path).ok());
  auto back = LoadPairsCsv(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), d.size());
  const GpuTable& a = d.gpus[0];
  const GpuTable& b = back->gpus[0];
  for (size_t i = 0; i < d.size(); ++i) {
    const size_t bi = *back->AppIndex(d.apps[i].name);
    EXPECT_NEAR(b.iso[bi], a.iso[i], 1e-9);
    for (size_t j = 0; j < d.size(); ++j) {
      const size_t bj = *back->AppIndex(d.apps[j].name);
      EXPECT_NEAR(back->At(b, bi, bj), d.At(a, i, j), 1e-9) << i << "," << j;
    }
  }
}

TEST(DatasetTest, CsvErrorsNameTheLineAndLoseNothing) {
  TempDir dir;
  auto missing = LoadPairsCsv(dir.File("a.csv", "gpu,app_a,app_b,slowdown_a\np100,x,y,1.2\n"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("slowdown_b"), std::string::npos);
  auto bad =
      LoadPairsCsv(dir.File("b.csv", "gpu,app_a,app_b,slowdown_a,slowdown_b\np100,x,y,1.2,1.1\np100,x,x,-3,2\n"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("b.csv:3"), std::string::npos) << bad.status().message();
  auto half = LoadPairsCsv(dir.File("c.csv", "gpu,app_a,app_b,slowdown_a,slowdown_b\np100,x,y,1.2,\n"));
  ASSERT_FALSE(half.ok());
  auto contra =
      LoadPairsCsv(dir.File("d.csv", "gpu,app_a,app_b,slowdown_a,slowdown_b\np100,x,y,1.2,1.1\np100,y,x,1.5,1.2\n"));
  ASSERT_FALSE(contra.ok());
  EXPECT_NE(contra.status().message().find("contradicts"), std::string::npos);
  auto agree = LoadPairsCsv(dir.File(
      "e.csv", "gpu,app_a,app_b,slowdown_a,slowdown_b\np100,x,y,1.2,1.1\np100,y,x,1.1,1.2\np100,x,x,inf,inf\n"));
  ASSERT_TRUE(agree.ok()) << agree.status().ToString();
  EXPECT_EQ(agree->At(agree->gpus[0], 0, 0), kInfeasible);
}

TEST(DatasetTest, DataDirFindsEverySource) {
  TempDir dir;
  const Dataset d = Synthetic(5, 2);
  ASSERT_TRUE(WritePairsCsv(d, dir.path() + "/mine.csv").ok());
  dir.File("coscheml/interference_12apps.json", R"js({"A": {"A": 1.5}})js");
  auto all = LoadDataDir(dir.path());
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].source, "coscheml");
  EXPECT_FALSE(LoadDataDir(dir.path() + "/nope").ok());
  TempDir empty;
  EXPECT_FALSE(LoadDataDir(empty.path()).ok());
}

TEST(LearnerTest, ReferencesComeFromTrainingAppsOnly) {
  const Dataset d = Synthetic(12, 3);
  std::vector<bool> train(12, true);
  train[0] = train[5] = false;
  const auto refs = ChooseReferences(d, {0}, train, 6);
  EXPECT_EQ(refs.size(), 6u);
  for (size_t r : refs) EXPECT_TRUE(train[r]) << r;
  EXPECT_TRUE(ChooseReferences(d, {0}, train, 0).empty());
}

TEST(LearnerTest, PredictsHeldOutApplicationsAndSurvivesSaveAndLoad) {
  const Dataset d = Synthetic(16, 4);
  Fold fold;
  fold.train_tables = {0};
  fold.train_app.assign(16, true);
  fold.train_app[3] = false;
  auto l = PairLearner::Train(d, fold, FastOptions());
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  std::vector<std::pair<size_t, size_t>> pairs;
  for (size_t j = 0; j < 16; ++j) {
    pairs.emplace_back(3, j);
    pairs.emplace_back(j, 3);
  }
  auto p = l->Predict(d, 0, pairs);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  double err = 0, const_err = 0;
  for (size_t k = 0; k < pairs.size(); ++k) {
    const double truth = d.At(d.gpus[0], pairs[k].first, pairs[k].second);
    err += std::abs(p->slowdown[k] - truth);
    const_err += std::abs(1.5 - truth);
  }
  EXPECT_LT(err, 0.5 * const_err) << "the learner should beat a constant on structured data";

  auto saved = l->Save();
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  auto loaded = PairLearner::Load(*saved);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  auto q = loaded->Predict(d, 0, pairs);
  ASSERT_TRUE(q.ok());
  for (size_t k = 0; k < pairs.size(); ++k) {
    EXPECT_NEAR(q->slowdown[k], p->slowdown[k], 1e-6);
    EXPECT_EQ(q->feasible[k], p->feasible[k]);
  }
  EXPECT_FALSE(PairLearner::Load("{}").ok());
  EXPECT_FALSE(PairLearner::Load("not json").ok());
}

TEST(LearnerTest, RejectsBadFoldsAndOptions) {
  const Dataset d = Synthetic(8, 5);
  Fold fold;
  fold.train_tables = {0};
  fold.train_app.assign(7, true);
  EXPECT_FALSE(PairLearner::Train(d, fold, FastOptions()).ok());
  fold.train_app.assign(8, true);
  ModelOptions o = FastOptions();
  o.ridge_weight = 2;
  EXPECT_FALSE(PairLearner::Train(d, fold, o).ok());
  fold.train_tables = {3};
  EXPECT_FALSE(PairLearner::Train(d, fold, FastOptions()).ok());
}

TEST(EvalTest, ModelBeatsTheNeighbourBaselineOnStructuredData) {
  const Dataset d = Synthetic(16, 6);
  EvalOptions o;
  o.model = FastOptions();
  auto rows = Evaluate(d, o);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);  // loao and lofo; no cross without k80/p100/v100
  const EvalRow& loao = (*rows)[0];
  EXPECT_EQ(loao.split, "loao");
  EXPECT_EQ(loao.model.incoming, 16);
  EXPECT_LE(loao.model.top1, loao.model.incoming);
  EXPECT_GT(loao.model.pairs, 0);
  EXPECT_EQ(loao.model.infeasible, 4);  // the one infeasible ordered pair twice, in each of the two folds
  EXPECT_LT(loao.model.mae, loao.baseline.mae);
  EXPECT_GT(loao.model.spearman, 0.5);
  const std::string lines = FormatResultLines(*rows);
  EXPECT_NE(lines.find("RESULT gpu=p100 split=loao mae="), std::string::npos) << lines;
  EXPECT_NE(FormatEvalTable(*rows).find("lofo"), std::string::npos);
}

TEST(EvalTest, TooFewApplicationsIsAnError) { EXPECT_FALSE(Evaluate(Synthetic(4, 7), EvalOptions{}).ok()); }

TEST(SlowdownModelTest, MeasuredNamesGpusAndPrior) {
  const Dataset d = Synthetic(6, 8);
  auto m = MeasuredSlowdown(d);
  const std::string& a = d.apps[0].name;
  const std::string& b = d.apps[1].name;
  const ports::PairSlowdown p = m->Pair(a, b, "Tesla-P100-PCIE-16GB");
  EXPECT_DOUBLE_EQ(p.incoming, d.At(d.gpus[0], 0, 1));
  EXPECT_DOUBLE_EQ(p.resident, d.At(d.gpus[0], 1, 0));
  EXPECT_TRUE(p.feasible);
  // Case and punctuation do not matter.
  std::string shouty;
  for (char c : a) shouty += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_DOUBLE_EQ(m->Pair(shouty, b, "p100").incoming, p.incoming);
  // The infeasible pair.
  EXPECT_FALSE(m->Pair(d.apps[5].name, d.apps[4].name, "p100").feasible);
  // An unknown incoming application next to b: the median of b's column.
  std::vector<double> col;
  for (size_t i = 0; i < 6; ++i) col.push_back(d.At(d.gpus[0], i, 1));
  std::sort(col.begin(), col.end());
  const ports::PairSlowdown u = m->Pair("never-seen", b, "p100");
  EXPECT_NEAR(u.incoming, (col[2] + col[3]) / 2, 1e-12);
  EXPECT_TRUE(u.feasible);
  EXPECT_FALSE(m->Knows("never-seen", "p100"));
  EXPECT_TRUE(m->Knows(a, "an unknown gpu falls back to the default table"));
  const ports::PairSlowdown both = m->Pair("x", "y", "p100");
  EXPECT_GE(both.incoming, 1.0);
  EXPECT_EQ(both.incoming, both.resident);
}

TEST(SlowdownModelTest, JoinAddsExcessSlowdowns) {
  const Dataset d = Synthetic(6, 9);
  auto m = MeasuredSlowdown(d);
  const std::vector<std::string> residents = {d.apps[1].name, d.apps[2].name};
  const auto g = ports::JoinSlowdown(*m, d.apps[0].name, residents, "p100");
  ASSERT_TRUE(g.has_value());
  const GpuTable& t = d.gpus[0];
  EXPECT_NEAR(g->incoming, 1 + (d.At(t, 0, 1) - 1) + (d.At(t, 0, 2) - 1), 1e-12);
  EXPECT_NEAR(g->residents_added, (d.At(t, 1, 0) - 1) + (d.At(t, 2, 0) - 1), 1e-12);
  const std::vector<std::string> bad = {d.apps[4].name};
  EXPECT_FALSE(ports::JoinSlowdown(*m, d.apps[5].name, bad, "p100").has_value());
  EXPECT_DOUBLE_EQ(ports::JoinSlowdown(*m, d.apps[0].name, {}, "p100")->Cost(), 1.0);
}

TEST(SlowdownModelTest, TrainedModelSavesLoadsAndServesMeasuredPairsFirst) {
  TempDir dir;
  Dataset d = Synthetic(10, 10);
  // Application 9 was only profiled against the references: blank its other pairs.
  Fold probe;
  probe.train_tables = {0};
  probe.train_app.assign(10, true);
  probe.train_app[9] = false;
  const auto refs = ChooseReferences(d, {0}, probe.train_app, 4);
  GpuTable& t = d.gpus[0];
  for (size_t j = 0; j < 10; ++j) {
    if (std::find(refs.begin(), refs.end(), j) != refs.end()) continue;
    t.slowdown[9 * 10 + j] = std::nan("");
    t.slowdown[j * 10 + 9] = std::nan("");
  }
  auto model = TrainedModel::Train({d}, FastOptions());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const std::string path = dir.path() + "/model.json";
  ASSERT_TRUE(model->Save(path).ok());
  auto loaded = TrainedModel::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  auto serve = loaded->Serve();
  ASSERT_TRUE(serve.ok()) << serve.status().ToString();
  // A measured pair comes back exactly.
  EXPECT_DOUBLE_EQ((*serve)->Pair(d.apps[0].name, d.apps[1].name, "p100").incoming, d.At(t, 0, 1));
  // A pair of the profiled-only application is predicted, not the prior, and is a sane slowdown.
  size_t other = 0;
  while (std::find(refs.begin(), refs.end(), other) != refs.end()) ++other;
  const ports::PairSlowdown p = (*serve)->Pair(d.apps[9].name, d.apps[other].name, "p100");
  EXPECT_GT(p.incoming, 1.0);
  EXPECT_LT(p.incoming, 3.0);
  EXPECT_TRUE((*serve)->Knows(d.apps[9].name, "p100"));
  // What the daemons load (no learner): the served tables give every pair exactly as Serve() does.
  auto served = LoadServedModel(path);
  ASSERT_TRUE(served.ok()) << served.status().ToString();
  for (size_t i = 0; i < 10; ++i) {
    for (size_t j = 0; j < 10; ++j) {
      const ports::PairSlowdown a = (*serve)->Pair(d.apps[i].name, d.apps[j].name, "p100");
      const ports::PairSlowdown b = (*served)->Pair(d.apps[i].name, d.apps[j].name, "p100");
      EXPECT_EQ(a.feasible, b.feasible) << i << " " << j;
      EXPECT_DOUBLE_EQ(a.incoming, b.incoming) << i << " " << j;
      EXPECT_DOUBLE_EQ(a.resident, b.resident) << i << " " << j;
    }
  }
  EXPECT_EQ((*served)->Describe(), (*serve)->Describe());
  // Bad files are errors naming the file.
  EXPECT_FALSE(TrainedModel::Load(dir.File("x.json", "{}")).ok());
  auto missing = TrainedModel::Load(dir.path() + "/none.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("none.json"), std::string::npos);
}

TEST(SlowdownModelTest, ServedModelErrorsNameWhatIsWrong) {
  auto message = [](std::string_view text) {
    auto r = ParseServedModel(text, "m.json");
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_NE(message("[]").find("m.json: not a JSON object"), std::string::npos);
  EXPECT_NE(message(R"({"kind": "other", "format": 2})").find("not a gpusched-lab interference model"),
            std::string::npos);
  // A 0.1.0 model (format 1) holds no served tables: the message says to train again.
  EXPECT_NE(message(R"({"kind": "gpusched-interference-model", "format": 1, "entries": []})").find("train it again"),
            std::string::npos);
  const std::string head = R"({"kind": "gpusched-interference-model", "format": 2, "served": )";
  EXPECT_NE(message(head + R"({"apps": ["a"], "tables": []}})").find("served.tables missing or empty"),
            std::string::npos);
  EXPECT_NE(message(head + R"({"apps": ["a", "b"], "tables": [{"gpu": "p100", "incoming": [1, 1, 1],
            "resident": [1, 1, 1, 1]}]}})")
                .find("served.tables[0].incoming: want an array of 4 values"),
            std::string::npos);
  EXPECT_NE(message(head + R"({"apps": ["a"], "tables": [{"gpu": "p100", "incoming": [-2], "resident": [1]}]}})")
                .find("-2 is not a slowdown"),
            std::string::npos);
  // A good one: null is unknown (the prior answers), 0 does not fit.
  auto ok = ParseServedModel(head + R"({"apps": ["a", "b"], "tables": [{"gpu": "p100",
      "incoming": [1.2, 0, null, 1.5], "resident": [1.2, 0, null, 1.5]}]}})",
                             "m.json");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_FALSE((*ok)->Pair("a", "b", "p100").feasible);
  EXPECT_DOUBLE_EQ((*ok)->Pair("b", "b", "Tesla-P100").incoming, 1.5);
  EXPECT_TRUE((*ok)->Knows("a", "p100"));
}

TEST(SlowdownModelTest, HeldOutPredictionsCoverEveryPair) {
  const Dataset d = Synthetic(8, 11);
  auto h = LeaveOneOutPredictions(d, 0, FastOptions());
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  auto m = HeldOutSlowdown(d, 0, *h);
  for (size_t i = 0; i < 8; ++i) {
    for (size_t j = 0; j < 8; ++j) {
      const ports::PairSlowdown p = m->Pair(d.apps[i].name, d.apps[j].name, "p100");
      if (p.feasible) {
        EXPECT_GT(p.incoming, 0.5);
        EXPECT_TRUE(std::isfinite(p.incoming));
      }
    }
  }
}

}  // namespace
}  // namespace gpusched::interference
