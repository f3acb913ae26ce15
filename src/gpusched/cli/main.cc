// gpusched: one binary, subcommands. Wiring only.

#include <CLI/CLI.hpp>

#include "gpusched/cli/extender_command.h"
#include "gpusched/cli/simulate_command.h"
#include "gpusched/policy/registry.h"

int main(int argc, char** argv) {
  CLI::App app{"gpusched: a Kubernetes GPU scheduler (simulate, extender; scheduler and agent come next)"};
  app.require_subcommand(1);
  int exit_code = 0;
  gpusched::cli::SimulateFlags simulate;
  gpusched::cli::AddSimulateCommand(app, simulate, exit_code);

  gpusched::cli::ExtenderFlags extender;
  std::string policies;
  for (const auto& n : gpusched::policy::PolicyNames()) {
    policies += (policies.empty() ? "" : ", ") + n;
  }
  CLI::App* ext = app.add_subcommand(
      "extender", "Serve kube-scheduler's extender verbs (filter, prioritize, bind, preempt) with GPU sharing");
  ext->add_option("--config", extender.config, "YAML config (listen, pathPrefix, tls, policy, resourceNames, ...)")
      ->check(CLI::ExistingFile);
  ext->add_option("--kubeconfig", extender.kubeconfig,
                  "kubeconfig (default: the config's, then $KUBECONFIG, in-cluster, ~/.kube/config)");
  ext->add_option("--listen", extender.listen, "host:port, overrides the config");
  ext->add_option("--policy", extender.policy, "Placement policy, overrides the config. Known: " + policies);
  ext->add_flag("-v,--verbose", extender.verbose, "Debug logging");
  ext->callback([&extender, &exit_code] { exit_code = gpusched::cli::RunExtender(extender); });

  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
