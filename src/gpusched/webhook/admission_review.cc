#include "gpusched/webhook/admission_review.h"

#include <cstdint>

namespace gpusched::webhook {
namespace {

using nlohmann::json;

// UIDs are 36 characters; anything far longer is not from an API server.
constexpr size_t kMaxUidBytes = 256;

common::Status Bad(const std::string& what) { return common::InvalidArgument("AdmissionReview: " + what); }

const json* Find(const json& j, std::string_view key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

// An optional string field; "" when absent or null.
common::Result<std::string> OptionalString(const json& j, std::string_view key, const std::string& where) {
  const json* v = Find(j, key);
  if (v == nullptr) {
    return std::string();
  }
  if (!v->is_string()) {
    return Bad(where + "." + std::string(key) + " is not a string");
  }
  return v->get<std::string>();
}

common::Result<GroupVersionKind> DecodeKind(const json& request) {
  const json* k = Find(request, "kind");
  if (k == nullptr || !k->is_object()) {
    return Bad("request.kind is missing or not an object");
  }
  GroupVersionKind out;
  GPUSCHED_ASSIGN_OR_RETURN(group, OptionalString(*k, "group", "request.kind"));
  GPUSCHED_ASSIGN_OR_RETURN(version, OptionalString(*k, "version", "request.kind"));
  GPUSCHED_ASSIGN_OR_RETURN(kind, OptionalString(*k, "kind", "request.kind"));
  if (kind.empty()) {
    return Bad("request.kind.kind is missing");
  }
  return GroupVersionKind{.group = group, .version = version, .kind = kind};
}

common::Result<GroupVersionResource> DecodeResource(const json& request) {
  const json* r = Find(request, "resource");
  if (r == nullptr || !r->is_object()) {
    return Bad("request.resource is missing or not an object");
  }
  GPUSCHED_ASSIGN_OR_RETURN(group, OptionalString(*r, "group", "request.resource"));
  GPUSCHED_ASSIGN_OR_RETURN(version, OptionalString(*r, "version", "request.resource"));
  GPUSCHED_ASSIGN_OR_RETURN(resource, OptionalString(*r, "resource", "request.resource"));
  if (resource.empty()) {
    return Bad("request.resource.resource is missing");
  }
  return GroupVersionResource{.group = group, .version = version, .resource = resource};
}

common::Result<UserInfo> DecodeUser(const json& request) {
  const json* u = Find(request, "userInfo");
  if (u == nullptr || !u->is_object()) {
    return Bad("request.userInfo is missing or not an object");
  }
  const json* name = Find(*u, "username");
  if (name == nullptr || !name->is_string()) {
    return Bad("request.userInfo.username is missing or not a string");
  }
  UserInfo out{.username = name->get<std::string>()};
  if (const json* groups = Find(*u, "groups"); groups != nullptr) {
    if (!groups->is_array()) {
      return Bad("request.userInfo.groups is not a list");
    }
    for (const json& g : *groups) {
      if (!g.is_string()) {
        return Bad("request.userInfo.groups has a non-string entry");
      }
      out.groups.push_back(g.get<std::string>());
    }
  }
  return out;
}

common::Result<Operation> DecodeOperation(const json& request) {
  const json* op = Find(request, "operation");
  if (op == nullptr || !op->is_string()) {
    return Bad("request.operation is missing or not a string");
  }
  const auto& s = op->get_ref<const std::string&>();
  for (Operation o : {Operation::kCreate, Operation::kUpdate, Operation::kDelete, Operation::kConnect}) {
    if (s == OperationName(o)) {
      return o;
    }
  }
  return Bad("request.operation \"" + s.substr(0, 32) + "\" is not one of CREATE, UPDATE, DELETE, CONNECT");
}

// One pass over the bytes, before parsing: the nesting depth and the number of values ('{', '[' and ',' outside
// strings). Sound for any bytes: up to the first byte the parser would refuse, it sees the same strings and brackets,
// so nothing deeper or larger than this counts is ever built.
common::Status PreScan(std::string_view body) {
  int depth = 0;
  size_t values = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : body) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > kMaxNestingDepth) {
          return Bad("the body nests arrays and objects more than " + std::to_string(kMaxNestingDepth) +
                     " levels deep; no Kubernetes object does");
        }
        [[fallthrough]];
      case ',':
        if (++values > kMaxJsonValues) {
          return Bad("the body holds more than " + std::to_string(kMaxJsonValues) +
                     " JSON values (objects, arrays and their members); a review of the largest object the API "
                     "server stores holds far fewer");
        }
        break;
      case ']':
      case '}':
        --depth;
        break;
      default:
        break;
    }
  }
  return common::Status::Ok();
}

// A lower bound of the length of `j` as compact JSON (strings counted without escapes), stopping once it is past
// `limit`. Recursive: PreScan has bounded the depth.
size_t EncodedSizeAtLeast(const json& j, size_t limit) {
  switch (j.type()) {
    case json::value_t::object: {
      size_t n = 2;
      for (auto it = j.begin(); it != j.end(); ++it) {
        n += it.key().size() + 4 + EncodedSizeAtLeast(it.value(), limit);
        if (n > limit) {
          return n;
        }
      }
      return n;
    }
    case json::value_t::array: {
      size_t n = 2;
      for (const json& value : j) {
        n += 1 + EncodedSizeAtLeast(value, limit);
        if (n > limit) {
          return n;
        }
      }
      return n;
    }
    case json::value_t::string:
      return j.get_ref<const std::string&>().size() + 2;
    case json::value_t::boolean:
    case json::value_t::null:
      return 4;
    default:
      return 1;
  }
}

// Moves request[key] out (never a copy: the object can be large).
common::Result<json> DecodeObject(json& request, std::string_view key) {
  auto it = request.find(key);
  if (it == request.end() || it->is_null()) {
    return json();
  }
  if (!it->is_object()) {
    return Bad("request." + std::string(key) + " is not an object");
  }
  if (const size_t size = EncodedSizeAtLeast(*it, kMaxObjectBytes); size > kMaxObjectBytes) {
    return Bad("request." + std::string(key) + " is larger than " + std::to_string(kMaxObjectBytes) +
               " bytes of JSON, the most etcd stores for one object");
  }
  json out = std::move(*it);
  return out;
}

}  // namespace

const char* OperationName(Operation operation) {
  switch (operation) {
    case Operation::kCreate:
      return "CREATE";
    case Operation::kUpdate:
      return "UPDATE";
    case Operation::kDelete:
      return "DELETE";
    case Operation::kConnect:
      return "CONNECT";
  }
  return "UNKNOWN";
}

common::Status CheckReviewBounds(std::string_view body) { return PreScan(body); }

common::Result<AdmissionRequest> DecodeAdmissionReview(std::string_view body) {
  GPUSCHED_RETURN_IF_ERROR(CheckReviewBounds(body));
  json review = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (review.is_discarded()) {
    return Bad("the body is not valid JSON");
  }
  if (!review.is_object()) {
    return Bad("the body is not a JSON object");
  }
  AdmissionRequest out;
  const json* api_version = Find(review, "apiVersion");
  if (api_version == nullptr || !api_version->is_string() ||
      (api_version->get_ref<const std::string&>() != kAdmissionV1 &&
       api_version->get_ref<const std::string&>() != kAdmissionV1beta1)) {
    return Bad("apiVersion must be " + std::string(kAdmissionV1) + " (or v1beta1)");
  }
  out.api_version = api_version->get<std::string>();
  const json* kind = Find(review, "kind");
  if (kind == nullptr || !kind->is_string() || kind->get_ref<const std::string&>() != "AdmissionReview") {
    return Bad("kind must be AdmissionReview");
  }
  auto request_it = review.find("request");
  json* request = request_it == review.end() ? nullptr : &*request_it;
  if (request == nullptr || !request->is_object()) {
    return Bad("request is missing or not an object");
  }
  GPUSCHED_ASSIGN_OR_RETURN(uid, OptionalString(*request, "uid", "request"));
  if (uid.empty() || uid.size() > kMaxUidBytes) {
    return Bad("request.uid is missing, empty or too long");
  }
  out.uid = std::move(uid);
  GPUSCHED_ASSIGN_OR_RETURN(gvk, DecodeKind(*request));
  out.kind = std::move(gvk);
  GPUSCHED_ASSIGN_OR_RETURN(gvr, DecodeResource(*request));
  out.resource = std::move(gvr);
  GPUSCHED_ASSIGN_OR_RETURN(sub, OptionalString(*request, "subResource", "request"));
  out.sub_resource = std::move(sub);
  GPUSCHED_ASSIGN_OR_RETURN(operation, DecodeOperation(*request));
  out.operation = operation;
  GPUSCHED_ASSIGN_OR_RETURN(user, DecodeUser(*request));
  out.user = std::move(user);
  GPUSCHED_ASSIGN_OR_RETURN(ns, OptionalString(*request, "namespace", "request"));
  out.namespace_name = std::move(ns);
  GPUSCHED_ASSIGN_OR_RETURN(name, OptionalString(*request, "name", "request"));
  out.name = std::move(name);
  GPUSCHED_ASSIGN_OR_RETURN(object, DecodeObject(*request, "object"));
  out.object = std::move(object);
  GPUSCHED_ASSIGN_OR_RETURN(old_object, DecodeObject(*request, "oldObject"));
  out.old_object = std::move(old_object);
  if (const json* dry = Find(*request, "dryRun"); dry != nullptr) {
    if (!dry->is_boolean()) {
      return Bad("request.dryRun is not a boolean");
    }
    out.dry_run = dry->get<bool>();
  }
  return out;
}

std::string EncodeAdmissionReview(const AdmissionRequest& request, const AdmissionResponse& response) {
  json r = {{"uid", request.uid}, {"allowed", response.allowed}};
  if (!response.allowed) {
    json status = {
        {"status", "Failure"}, {"code", response.code == 0 ? 403 : response.code}, {"message", response.message}};
    if (!response.reason.empty()) {
      status["reason"] = response.reason;
    }
    r["status"] = std::move(status);
  } else if (!response.patch.is_null()) {
    r["patchType"] = "JSONPatch";
    r["patch"] = EncodeBase64(response.patch.dump());
  }
  if (!response.warnings.empty()) {
    r["warnings"] = response.warnings;
  }
  const json review = {{"apiVersion", request.api_version.empty() ? std::string(kAdmissionV1) : request.api_version},
                       {"kind", "AdmissionReview"},
                       {"response", std::move(r)}};
  // Messages may hold bytes from the pod (names, annotation values): replace invalid UTF-8 instead of throwing.
  return review.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace gpusched::webhook
