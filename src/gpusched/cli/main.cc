// gpusched: one binary, subcommands. Wiring only.

#include <CLI/CLI.hpp>

#include "gpusched/cli/simulate_command.h"

int main(int argc, char** argv) {
  CLI::App app{"gpusched: a Kubernetes GPU scheduler (simulate; extender, scheduler and agent come next)"};
  app.require_subcommand(1);
  int exit_code = 0;
  gpusched::cli::SimulateFlags simulate;
  gpusched::cli::AddSimulateCommand(app, simulate, exit_code);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
