#pragma once

// The kube-scheduler extender wire format (k8s.io/kube-scheduler/extender/v1; k8s-gpu-protocols.md section 1).
// The envelope types have no json tags: keys are Go field names, CapitalCase out, any case in. Embedded Pod and
// Node objects keep their API JSON. Unused fields arrive as null.
//
// Decoding is on the hot path (a full NodeList of 500 nodes is about 1.6 MB), so requests are read with
// simdjson's on-demand API: the Pod and each Node are kept as raw JSON text pointing into the request body
// (which the args own), node names are extracted without building a DOM, and a filter response in full-object
// mode echoes the passing Node objects byte for byte. Every decoder returns InvalidArgument naming the field for
// malformed, truncated or mistyped input and never crashes (fuzzed in fuzz/).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpusched/common/status.h"

namespace gpusched::extender {

struct NodeRef {
  std::string name;
  std::string_view raw;  // the Node object's JSON (full-object mode only), pointing into ExtenderArgs::body
};

// ExtenderArgs: the body of filter and prioritize.
struct ExtenderArgs {
  std::string body;            // owns the bytes the views point into (with simdjson's padding)
  std::string_view pod;        // the Pod object's JSON
  bool full_nodes = false;     // Nodes (a NodeList) was sent rather than NodeNames
  std::vector<NodeRef> nodes;  // in request order
};
common::Result<ExtenderArgs> DecodeExtenderArgs(std::string body);

// The filter response. In names mode NodeNames is set and Nodes is null; in full mode the reverse, with the
// passing nodes' raw JSON echoed.
struct FilterResult {
  bool full_nodes = false;
  std::vector<const NodeRef*> passed;
  std::vector<std::pair<std::string, std::string>> failed;               // node -> reason
  std::vector<std::pair<std::string, std::string>> failed_unresolvable;  // node -> reason
  std::string error;
};
std::string EncodeFilterResult(const FilterResult& result);

// HostPriorityList: a bare JSON array of {"Host","Score"}.
std::string EncodeHostPriorityList(const std::vector<std::pair<std::string, int64_t>>& scores);

struct BindingArgs {
  std::string pod_name;
  std::string pod_namespace;
  std::string pod_uid;
  std::string node;
};
common::Result<BindingArgs> DecodeBindingArgs(std::string body);
std::string EncodeBindingResult(std::string_view error);

// ExtenderPreemptionArgs. Victims arrive as full pods (NodeNameToVictims) or as UIDs (NodeNameToMetaVictims);
// both are reduced to UIDs.
struct NodeVictims {
  std::vector<std::string> pod_uids;
  int64_t num_pdb_violations = 0;
};
struct PreemptionArgs {
  std::string body;
  std::string_view pod;
  std::vector<std::pair<std::string, NodeVictims>> nodes;  // in request order
};
common::Result<PreemptionArgs> DecodePreemptionArgs(std::string body);
// ExtenderPreemptionResult: always the Meta form.
std::string EncodePreemptionResult(const std::vector<std::pair<std::string, NodeVictims>>& nodes);

// A JSON string literal (quoted and escaped).
std::string JsonString(std::string_view s);
// The same, appended to `out`.
void AppendJsonString(std::string& out, std::string_view s);

}  // namespace gpusched::extender
