#pragma once

// The workloads `gpusched-lab monitor` runs: Kubernetes objects read from YAML files (multi-document), one workload per
// file, and what the monitor does to them before it creates them.
//
// Reading: each document of a file is one object (an empty document is skipped; a document that is a List has its
// items taken in order). YAML becomes JSON as the API server would read it: a plain scalar that reads as an
// integer, a float, true/false or null becomes that; a quoted scalar stays a string ("1" is a string, 1 is an
// integer). Every object needs apiVersion, kind and metadata.name (or metadata.generateName). Errors name
// file:line (1-based) and what is wrong; nothing is created from a set of files that has one error.
//
// Labelling: every object gets the label gpusched.io/monitor-run=<run id>, and so does every pod template it holds
// (spec.template of a Job, Deployment, StatefulSet, ReplicaSet or DaemonSet; spec.jobTemplate.spec.template of a
// CronJob), so that the monitor finds the pods the workload makes and deletes only what it created.
//
// Kinds the monitor waits on: Pod (Succeeded / Failed), batch/v1 Job (Complete / Failed), apps/v1 Deployment
// (never ends by itself: --duration). Other kinds are created and deleted, not waited on.

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpusched/common/status.h"

namespace gpusched::monitor {

inline constexpr std::string_view kRunLabel = "gpusched.io/monitor-run";

enum class WaitKind { kNone, kPod, kJob, kDeployment };

struct ManifestObject {
  std::string file;
  int line = 0;  // of the document's first line, 1-based
  nlohmann::json object;
  [[nodiscard]] std::string Kind() const;
  [[nodiscard]] std::string ApiVersion() const;
  [[nodiscard]] std::string Name() const;  // metadata.name, or generateName + "*"
  [[nodiscard]] WaitKind Wait() const;
  [[nodiscard]] std::string Where() const { return file + ":" + std::to_string(line); }
};

struct Workload {
  std::string name;  // the file's name without directory and extension
  std::string file;
  std::vector<ManifestObject> objects;
  [[nodiscard]] bool HasDeployment() const;
  [[nodiscard]] bool WaitsOnSomething() const;
};

// The objects of one YAML text (`file` names it in errors).
[[nodiscard]] common::Result<std::vector<ManifestObject>> ParseManifests(std::string_view text,
                                                                         const std::string& file);

// One workload per file; a directory contributes its *.yaml and *.yml files (not recursively), in name order.
// NotFound for a path that does not exist; InvalidArgument for a directory without YAML files, a file without
// objects, or an object that does not parse.
[[nodiscard]] common::Result<std::vector<Workload>> LoadWorkloads(const std::vector<std::string>& paths);

// Adds the run label to the object and to its pod templates (see above).
void LabelForRun(nlohmann::json& object, const std::string& run_id);

}  // namespace gpusched::monitor
