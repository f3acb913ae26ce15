#pragma once

// `gpusched-lab interference train|eval|predict`: the slowdown model from co-location measurements. Wiring only
// (interference/ does the work).

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace gpusched::cli {

struct InterferenceFlags {
  std::string data;  // required: where the measurements are (docs/interference.md says where to get them)
  std::string model = "interference-model.json";
  std::vector<std::string> gpus;
  std::vector<std::string> splits;
  int references = 8;
  double ridge_weight = 1.0;
  double ridge_lambda = 1.0;
  int trees = 400;
  int depth = 3;
  std::string app;
  std::vector<std::string> with;
  std::string gpu = "p100";
};

void AddInterferenceCommand(CLI::App& app, InterferenceFlags& flags, int& exit_code);

}  // namespace gpusched::cli
