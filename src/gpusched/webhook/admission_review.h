#pragma once

// The AdmissionReview of admission.k8s.io/v1: what kube-apiserver POSTs to an admission webhook, and the answer it
// expects. Pure: bytes in, values out.
//
// Decoding reads the request fields gpusched's rules need and checks their types; anything else is ignored (the
// API server adds fields over time). It refuses, naming the field: a body that is not a JSON object, an apiVersion
// other than admission.k8s.io/v1 (or v1beta1, which has the same shape), a kind other than AdmissionReview, a
// missing or empty request.uid, an operation other than CREATE/UPDATE/DELETE/CONNECT, a missing userInfo or
// resource, and object/oldObject that are neither an object nor null. The HTTP layer answers those with 400.
//
// Bounded whatever the bytes (the port is reachable by whoever can reach the Service, not only kube-apiserver).
// Before anything is parsed, one pass over the bytes refuses a body that nests arrays and objects deeper than
// kMaxNestingDepth or holds more than kMaxJsonValues values (each '{', '[' and ',' outside strings counts one: a
// million empty objects would otherwise take a hundred bytes of memory each, 30 times the body). After parsing, an
// object or oldObject whose compact JSON is longer than kMaxObjectBytes (etcd's default object limit; the API
// server stores nothing larger) is refused. The parsed object and oldObject are moved into the request, never
// copied.
//
// Encoding echoes the request's apiVersion and uid (the API server rejects an answer for another uid), and writes
// status {status: Failure, code, reason, message} only when denying, patchType JSONPatch with the base64 patch only
// when mutating, and warnings when there are any.

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpusched/common/status.h"
#include "gpusched/kube/base64.h"

namespace gpusched::webhook {

inline constexpr std::string_view kAdmissionV1 = "admission.k8s.io/v1";
inline constexpr std::string_view kAdmissionV1beta1 = "admission.k8s.io/v1beta1";

// A pod nests 10 levels deep (spec.containers[].resources.limits; managedFields' fieldsV1 adds about 10 more):
// 64 leaves room for any real object and keeps every recursive walk over it shallow.
inline constexpr int kMaxNestingDepth = 64;
// '{', '[' and ',' outside strings, in the whole body. A real 1.5 MiB pod (object and oldObject) has about 150,000;
// 250,000 of them decode to at most about 30 MiB (measured by bench/webhook-rss.sh).
inline constexpr size_t kMaxJsonValues = 250'000;
// etcd's default request limit (--max-request-bytes, 1.5 MiB): kube-apiserver cannot store a larger object.
inline constexpr size_t kMaxObjectBytes = 1536 * 1024;

enum class Operation { kCreate, kUpdate, kDelete, kConnect };

struct GroupVersionKind {
  std::string group;
  std::string version;
  std::string kind;
};

struct GroupVersionResource {
  std::string group;  // "" for the core group (pods, bindings)
  std::string version;
  std::string resource;
};

struct UserInfo {
  std::string username;  // "alice", "system:serviceaccount:kube-system:gpusched-extender"
  std::vector<std::string> groups;
};

struct AdmissionRequest {
  std::string api_version;  // of the review, echoed in the answer
  std::string uid;
  GroupVersionKind kind;
  GroupVersionResource resource;
  std::string sub_resource;  // "", "status", "binding", ...
  Operation operation = Operation::kCreate;
  UserInfo user;
  std::string namespace_name;  // "" for cluster-scoped objects
  std::string name;            // "" when the object's name is generated after admission (generateName)
  nlohmann::json object;       // null for DELETE
  nlohmann::json old_object;   // null for CREATE
  bool dry_run = false;

  // The request is about the core group's `resource` (e.g. "pods") with that subresource.
  [[nodiscard]] bool Is(std::string_view core_resource, std::string_view sub = "") const {
    return resource.group.empty() && resource.resource == core_resource && sub_resource == sub;
  }
};

struct AdmissionResponse {
  bool allowed = true;
  // When denied: the HTTP status the API server reports to the client (403 not allowed, 422 invalid), the
  // machine-readable reason ("Forbidden", "Invalid") and the human reason.
  int code = 0;
  std::string reason;
  std::string message;
  nlohmann::json patch;  // a JSON Patch (RFC 6902) array when mutating; null = no change
  std::vector<std::string> warnings;
  // When denying a change to a pod that exists: what its Warning Event says. Fixed words and what the rule derived,
  // never free text from the request (whose user, for one, is only known when the review is verified).
  std::string event_message;

  static AdmissionResponse Allow() { return {}; }
  static AdmissionResponse Deny(int code, std::string reason, std::string message) {
    return {.allowed = false, .code = code, .reason = std::move(reason), .message = std::move(message)};
  }
};

[[nodiscard]] const char* OperationName(Operation operation);

// The bounds checked over the bytes before parsing (nesting, number of values); one pass, no allocation. OK or
// InvalidArgument naming the bound. DecodeAdmissionReview checks them too.
common::Status CheckReviewBounds(std::string_view body);

// Decodes a whole AdmissionReview body. Errors are InvalidArgument and name the field.
common::Result<AdmissionRequest> DecodeAdmissionReview(std::string_view body);

// The AdmissionReview answering `request`.
[[nodiscard]] std::string EncodeAdmissionReview(const AdmissionRequest& request, const AdmissionResponse& response);

// Standard base64 with padding (the patch field's encoding).
using kube::EncodeBase64;

}  // namespace gpusched::webhook
