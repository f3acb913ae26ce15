#include "gpusched/cli/doctor_command.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <iostream>
#include <utility>

#include <nlohmann/json.hpp>

#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/adapters/k8s/client_config.h"
#include "gpusched/doctor/doctor.h"
#include "gpusched/doctor/expected_setup.h"
#include "gpusched/doctor/report.h"

namespace gpusched::cli {
namespace {

int RunDoctorCommand(const DoctorFlags& flags) {
  auto setup = doctor::ExpectedSetupOf(flags.mode);
  if (!setup.ok()) {
    std::cerr << "gpusched doctor: " << setup.status().message() << "\n";
    return 2;
  }
  auto config = adapters::k8s::ResolveClientConfig(flags.kubeconfig, flags.context);
  if (!config.ok()) {
    std::cerr << "gpusched doctor: " << config.status().message() << "\n";
    return 2;
  }
  config->request_timeout = std::chrono::seconds(flags.timeout_s);
  auto client = adapters::k8s::ApiClient::Create(*std::move(config));
  if (!client.ok()) {
    std::cerr << "gpusched doctor: " << client.status().message() << "\n";
    return 2;
  }
  const doctor::Report report = doctor::RunDoctor(**client, *setup, {.namespace_ = flags.namespace_});
  if (flags.output == "json") {
    std::cout << doctor::ToJson(report).dump(2) << "\n";
  } else {
    std::cout << doctor::FormatText(report);
  }
  return doctor::ExitCode(report);
}

}  // namespace

void AddDoctorCommand(CLI::App& app, DoctorFlags& flags, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "doctor",
      "Check the cluster's gpusched setup for an install mode and say what to fix: API server, CRDs, webhooks and "
      "their certificate, node inventory, device plugin, agents' readiness (MPS), leader Lease, RBAC (read-only)");
  cmd->add_option("--mode", flags.mode, "The install of deploy/ to check: scheduler, extender or agent")
      ->check(CLI::IsMember({"scheduler", "extender", "agent"}))
      ->capture_default_str();
  cmd->add_option("-o,--output", flags.output, "json: one JSON document instead of one line per finding")
      ->check(CLI::IsMember({"", "json"}));
  cmd->add_option("-n,--namespace", flags.namespace_,
                  "Namespace for the dry-run GPU pod that exercises the admission webhooks (nothing is stored)")
      ->capture_default_str();
  cmd->add_option("--timeout", flags.timeout_s, "Seconds each request to the API server may take")
      ->check(CLI::Range(1, 300))
      ->capture_default_str();
  cmd->add_option("--kubeconfig", flags.kubeconfig, "kubeconfig (default $KUBECONFIG, in-cluster, ~/.kube/config)");
  cmd->add_option("--context", flags.context, "kubeconfig context (default: its current-context)");
  cmd->callback([&flags, &exit_code] { exit_code = RunDoctorCommand(flags); });
}

}  // namespace gpusched::cli
