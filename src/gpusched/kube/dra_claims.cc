#include "gpusched/kube/dra_claims.h"

#include <map>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "gpusched/kube/dra_slices.h"

namespace gpusched::kube {
namespace {

using core::dra::AllocationMode;
using core::dra::ClaimAllocation;
using core::dra::DeviceRequest;
using core::dra::DeviceSubRequest;
using nlohmann::json;

// The API's limits (resource.k8s.io/v1), checked on the way in so that nothing downstream sees more.
constexpr size_t kMaxRequests = 32;
constexpr size_t kMaxSubRequests = 8;
constexpr size_t kMaxSelectors = 32;
constexpr size_t kMaxConstraints = 32;
constexpr size_t kMaxTolerations = 16;
constexpr size_t kMaxExpressionBytes = 10 * 1024;

const json* Find(const json& j, std::string_view key) {
  if (!j.is_object()) {
    return nullptr;
  }
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

common::Result<std::string> String(const json& j, std::string_view key, const std::string& where,
                                   bool required = false) {
  const json* v = Find(j, key);
  if (v == nullptr) {
    if (required) {
      return common::InvalidArgument(where + "." + std::string(key) + " is required");
    }
    return std::string();
  }
  if (!v->is_string()) {
    return common::InvalidArgument(where + "." + std::string(key) + " must be a string");
  }
  return v->get<std::string>();
}

common::Result<const json*> Array(const json& j, std::string_view key, const std::string& where, size_t max) {
  const json* v = Find(j, key);
  if (v == nullptr) {
    return static_cast<const json*>(nullptr);
  }
  if (!v->is_array()) {
    return common::InvalidArgument(where + "." + std::string(key) + " must be a list");
  }
  if (v->size() > max) {
    return common::InvalidArgument(where + "." + std::string(key) + " has " + std::to_string(v->size()) +
                                   " entries, more than the API's " + std::to_string(max));
  }
  return v;
}

common::Result<std::vector<std::string>> Selectors(const json& j, const std::string& where) {
  auto list = Array(j, "selectors", where, kMaxSelectors);
  if (!list.ok()) {
    return list.status();
  }
  std::vector<std::string> out;
  if (*list == nullptr) {
    return out;
  }
  for (size_t i = 0; i < (*list)->size(); ++i) {
    const json& s = (**list)[i];
    const std::string at = where + ".selectors[" + std::to_string(i) + "]";
    const json* cel = Find(s, "cel");
    if (cel == nullptr) {
      return common::InvalidArgument(at + " is not a CEL selector (the only kind this scheduler evaluates)");
    }
    auto expr = String(*cel, "expression", at + ".cel", true);
    if (!expr.ok()) {
      return expr.status();
    }
    if (expr->size() > kMaxExpressionBytes) {
      return common::InvalidArgument(at + ".cel.expression is longer than the API's 10 KiB");
    }
    out.push_back(std::move(*expr));
  }
  return out;
}

common::Result<std::vector<core::dra::DeviceToleration>> Tolerations(const json& j, const std::string& where) {
  auto list = Array(j, "tolerations", where, kMaxTolerations);
  if (!list.ok()) {
    return list.status();
  }
  std::vector<core::dra::DeviceToleration> out;
  if (*list == nullptr) {
    return out;
  }
  for (size_t i = 0; i < (*list)->size(); ++i) {
    const json& t = (**list)[i];
    const std::string at = where + ".tolerations[" + std::to_string(i) + "]";
    core::dra::DeviceToleration tol;
    auto key = String(t, "key", at);
    auto op = String(t, "operator", at);
    auto value = String(t, "value", at);
    auto effect = String(t, "effect", at);
    for (const auto* r : {&key, &op, &value, &effect}) {
      if (!r->ok()) {
        return r->status();
      }
    }
    tol.key = *key;
    tol.op = op->empty() ? "Equal" : *op;
    if (tol.op != "Equal" && tol.op != "Exists") {
      return common::InvalidArgument(at + ".operator \"" + tol.op + "\" is neither Equal nor Exists");
    }
    tol.value = *value;
    tol.effect = *effect;
    out.push_back(std::move(tol));
  }
  return out;
}

// The fields ExactDeviceRequest and DeviceSubRequest share (and, in v1beta1, DeviceRequest itself).
common::Status DecodeSub(const json& j, const std::string& where, DeviceSubRequest& sub) {
  auto cls = String(j, "deviceClassName", where, true);
  if (!cls.ok()) {
    return cls.status();
  }
  sub.device_class = std::move(*cls);
  auto selectors = Selectors(j, where);
  if (!selectors.ok()) {
    return selectors.status();
  }
  sub.selectors = std::move(*selectors);
  auto mode = String(j, "allocationMode", where);
  if (!mode.ok()) {
    return mode.status();
  }
  if (mode->empty() || *mode == "ExactCount") {
    sub.mode = AllocationMode::kExactCount;
    sub.count = 1;
    if (const json* count = Find(j, "count"); count != nullptr) {
      if (!count->is_number_integer() || count->get<int64_t>() < 1) {
        return common::InvalidArgument(where + ".count must be an integer of at least 1");
      }
      sub.count = count->get<int64_t>();
    }
  } else if (*mode == "All") {
    sub.mode = AllocationMode::kAll;
    sub.count = 0;
  } else {
    return common::InvalidArgument(where + ".allocationMode \"" + *mode +
                                   "\" is unknown (ExactCount and All are; a client must refuse other modes)");
  }
  auto tolerations = Tolerations(j, where);
  if (!tolerations.ok()) {
    return tolerations.status();
  }
  sub.tolerations = std::move(*tolerations);
  if (const json* cap = Find(j, "capacity"); cap != nullptr) {
    if (const json* requests = Find(*cap, "requests"); requests != nullptr) {
      if (!requests->is_object()) {
        return common::InvalidArgument(where + ".capacity.requests must be a map");
      }
      for (const auto& [name, value] : requests->items()) {
        auto q = ParseDraQuantity(value);
        if (!q.ok()) {
          return common::InvalidArgument(where + ".capacity.requests[" + name + "]: " + q.status().message());
        }
        sub.capacity.emplace(name, *q);
      }
    }
  }
  return common::Status::Ok();
}

common::Result<DeviceRequest> DecodeRequest(const json& j, const std::string& where) {
  DeviceRequest request;
  auto name = String(j, "name", where, true);
  if (!name.ok()) {
    return name.status();
  }
  request.name = std::move(*name);
  const json* exactly = Find(j, "exactly");
  auto first = Array(j, "firstAvailable", where, kMaxSubRequests);
  if (!first.ok()) {
    return first.status();
  }
  const bool beta_shape = Find(j, "deviceClassName") != nullptr;
  if ((exactly != nullptr) + (*first != nullptr) + (beta_shape ? 1 : 0) != 1) {
    return common::InvalidArgument(where + " must set exactly one of exactly and firstAvailable");
  }
  auto admin = [&](const json& src) -> common::Status {
    if (const json* a = Find(src, "adminAccess"); a != nullptr) {
      if (!a->is_boolean()) {
        return common::InvalidArgument(where + ".adminAccess must be a boolean");
      }
      request.admin_access = a->get<bool>();
    }
    return common::Status::Ok();
  };
  if (exactly != nullptr || beta_shape) {
    const json& src = exactly != nullptr ? *exactly : j;
    DeviceSubRequest sub;
    sub.name = request.name;
    if (common::Status s = DecodeSub(src, exactly != nullptr ? where + ".exactly" : where, sub); !s.ok()) {
      return s;
    }
    if (common::Status s = admin(src); !s.ok()) {
      return s;
    }
    request.exactly = std::move(sub);
    return request;
  }
  for (size_t i = 0; i < (*first)->size(); ++i) {
    const json& s = (**first)[i];
    const std::string at = where + ".firstAvailable[" + std::to_string(i) + "]";
    auto sub_name = String(s, "name", at, true);
    if (!sub_name.ok()) {
      return sub_name.status();
    }
    DeviceSubRequest sub;
    sub.name = request.name + "/" + *sub_name;
    if (common::Status st = DecodeSub(s, at, sub); !st.ok()) {
      return st;
    }
    request.first_available.push_back(std::move(sub));
  }
  if (request.first_available.empty()) {
    return common::InvalidArgument(where + ".firstAvailable is empty");
  }
  return request;
}

}  // namespace

common::Result<ClaimAllocation> DecodeClaimAllocation(const json& allocation) {
  ClaimAllocation out;
  const std::string where = "status.allocation";
  if (const json* devices = Find(allocation, "devices"); devices != nullptr) {
    auto results = Array(*devices, "results", where + ".devices", kMaxRequests);
    if (!results.ok()) {
      return results.status();
    }
    if (*results != nullptr) {
      for (size_t i = 0; i < (*results)->size(); ++i) {
        const json& r = (**results)[i];
        const std::string at = where + ".devices.results[" + std::to_string(i) + "]";
        core::dra::DeviceResult res;
        auto request = String(r, "request", at, true);
        auto driver = String(r, "driver", at, true);
        auto pool = String(r, "pool", at, true);
        auto device = String(r, "device", at, true);
        auto share = String(r, "shareID", at);
        for (const auto* f : {&request, &driver, &pool, &device, &share}) {
          if (!f->ok()) {
            return f->status();
          }
        }
        res.request = *request;
        res.driver = *driver;
        res.pool = *pool;
        res.device = *device;
        res.share_id = *share;
        if (const json* a = Find(r, "adminAccess"); a != nullptr && a->is_boolean()) {
          res.admin_access = a->get<bool>();
        }
        if (const json* consumed = Find(r, "consumedCapacity"); consumed != nullptr && consumed->is_object()) {
          for (const auto& [name, value] : consumed->items()) {
            auto q = ParseDraQuantity(value);
            if (!q.ok()) {
              return common::InvalidArgument(at + ".consumedCapacity[" + name + "]: " + q.status().message());
            }
            res.consumed_capacity.emplace(name, *q);
          }
        }
        out.devices.push_back(std::move(res));
      }
    }
  }
  // The node: kube-scheduler writes one term with matchFields metadata.name In [node] for node-local devices.
  if (const json* selector = Find(allocation, "nodeSelector"); selector != nullptr) {
    const json* terms = Find(*selector, "nodeSelectorTerms");
    if (terms != nullptr && terms->is_array() && terms->size() == 1) {
      const json* fields = Find((*terms)[0], "matchFields");
      if (fields != nullptr && fields->is_array() && fields->size() == 1) {
        const json& f = (*fields)[0];
        const json* values = Find(f, "values");
        if (f.value("key", "") == "metadata.name" && f.value("operator", "") == "In" && values != nullptr &&
            values->is_array() && values->size() == 1 && (*values)[0].is_string()) {
          out.node = common::NodeName((*values)[0].get<std::string>());
        }
      }
    }
  }
  return out;
}

json EncodeClaimAllocation(const ClaimAllocation& allocation) {
  json results = json::array();
  for (const auto& r : allocation.devices) {
    json e = {{"request", r.request}, {"driver", r.driver}, {"pool", r.pool}, {"device", r.device}};
    if (r.admin_access) {
      e["adminAccess"] = true;
    }
    if (!r.share_id.empty()) {
      e["shareID"] = r.share_id;
    }
    if (!r.consumed_capacity.empty()) {
      json consumed = json::object();
      for (const auto& [name, q] : r.consumed_capacity) {
        consumed[name] = FormatDraQuantity(q);
      }
      e["consumedCapacity"] = std::move(consumed);
    }
    results.push_back(std::move(e));
  }
  json out = {{"devices", {{"results", std::move(results)}}}};
  if (!allocation.node.str().empty()) {
    out["nodeSelector"] = {
        {"nodeSelectorTerms",
         json::array({{{"matchFields", json::array({{{"key", "metadata.name"},
                                                     {"operator", "In"},
                                                     {"values", json::array({allocation.node.str()})}}})}}})}};
  }
  return out;
}

json EncodeClaimStatus(const ClaimAllocation& allocation, std::span<const ClaimConsumer> reserved_for) {
  json reserved = json::array();
  for (const auto& c : reserved_for) {
    reserved.push_back({{"resource", "pods"}, {"name", c.name}, {"uid", c.uid.str()}});
  }
  return {{"allocation", EncodeClaimAllocation(allocation)}, {"reservedFor", std::move(reserved)}};
}

common::Result<core::dra::ResourceClaim> DecodeResourceClaim(const json& claim) {
  core::dra::ResourceClaim out;
  const json* metadata = Find(claim, "metadata");
  if (metadata == nullptr) {
    return common::InvalidArgument("ResourceClaim has no metadata");
  }
  auto ns = String(*metadata, "namespace", "metadata");
  auto name = String(*metadata, "name", "metadata", true);
  auto uid = String(*metadata, "uid", "metadata");
  for (const auto* f : {&ns, &name, &uid}) {
    if (!f->ok()) {
      return common::InvalidArgument("ResourceClaim: " + f->status().message());
    }
  }
  out.namespace_ = *ns;
  out.name = *name;
  out.uid = *uid;
  out.deallocation_requested = Find(*metadata, "deletionTimestamp") != nullptr;
  const std::string self = "ResourceClaim " + out.namespace_ + "/" + out.name + ": ";
  auto fail = [&](const common::Status& s) { return common::Status(s.code(), self + s.message()); };

  const json* devices = nullptr;
  if (const json* spec = Find(claim, "spec"); spec != nullptr) {
    devices = Find(*spec, "devices");
  }
  if (devices != nullptr) {
    auto requests = Array(*devices, "requests", "spec.devices", kMaxRequests);
    if (!requests.ok()) {
      return fail(requests.status());
    }
    if (*requests != nullptr) {
      for (size_t i = 0; i < (*requests)->size(); ++i) {
        auto r = DecodeRequest((**requests)[i], "spec.devices.requests[" + std::to_string(i) + "]");
        if (!r.ok()) {
          return fail(r.status());
        }
        out.requests.push_back(std::move(*r));
      }
    }
    auto constraints = Array(*devices, "constraints", "spec.devices", kMaxConstraints);
    if (!constraints.ok()) {
      return fail(constraints.status());
    }
    if (*constraints != nullptr) {
      for (size_t i = 0; i < (*constraints)->size(); ++i) {
        const json& k = (**constraints)[i];
        const std::string at = "spec.devices.constraints[" + std::to_string(i) + "]";
        core::dra::DeviceConstraint c;
        auto match = String(k, "matchAttribute", at);
        auto distinct = String(k, "distinctAttribute", at);
        if (!match.ok() || !distinct.ok()) {
          return fail(!match.ok() ? match.status() : distinct.status());
        }
        c.match_attribute = *match;
        c.distinct_attribute = *distinct;
        if (c.match_attribute.empty() == c.distinct_attribute.empty()) {
          return fail(common::InvalidArgument(at + " must set exactly one of matchAttribute and distinctAttribute"));
        }
        const std::string& attr = c.match_attribute.empty() ? c.distinct_attribute : c.match_attribute;
        if (attr.find('/') == std::string::npos) {
          return fail(common::InvalidArgument(at + ": attribute \"" + attr + "\" must include its domain"));
        }
        if (const json* reqs = Find(k, "requests"); reqs != nullptr && reqs->is_array()) {
          for (const auto& r : *reqs) {
            if (r.is_string()) {
              c.requests.push_back(r.get<std::string>());
            }
          }
        }
        out.constraints.push_back(std::move(c));
      }
    }
  }
  if (const json* status = Find(claim, "status"); status != nullptr) {
    if (const json* allocation = Find(*status, "allocation"); allocation != nullptr) {
      auto a = DecodeClaimAllocation(*allocation);
      if (!a.ok()) {
        return fail(a.status());
      }
      out.allocation = std::move(*a);
    }
    if (const json* reserved = Find(*status, "reservedFor"); reserved != nullptr && reserved->is_array()) {
      for (const auto& r : *reserved) {
        if (r.value("resource", "") == "pods" && r.contains("uid") && r["uid"].is_string()) {
          out.reserved_for.emplace_back(r["uid"].get<std::string>());
        }
      }
    }
  }
  return out;
}

common::Result<core::dra::DeviceClass> DecodeDeviceClass(const json& device_class) {
  core::dra::DeviceClass out;
  const json* metadata = Find(device_class, "metadata");
  if (metadata == nullptr) {
    return common::InvalidArgument("DeviceClass has no metadata");
  }
  auto name = String(*metadata, "name", "metadata", true);
  if (!name.ok()) {
    return common::InvalidArgument("DeviceClass: " + name.status().message());
  }
  out.name = *name;
  if (const json* spec = Find(device_class, "spec"); spec != nullptr) {
    auto selectors = Selectors(*spec, "spec");
    if (!selectors.ok()) {
      return common::InvalidArgument("DeviceClass " + out.name + ": " + selectors.status().message());
    }
    out.selectors = std::move(*selectors);
    auto ext = String(*spec, "extendedResourceName", "spec");
    if (!ext.ok()) {
      return common::InvalidArgument("DeviceClass " + out.name + ": " + ext.status().message());
    }
    out.extended_resource_name = *ext;
  }
  return out;
}

common::Result<std::vector<PodClaimRef>> DecodePodClaimRefs(const json& pod) {
  std::vector<PodClaimRef> out;
  const json* spec = Find(pod, "spec");
  const json* claims = spec == nullptr ? nullptr : Find(*spec, "resourceClaims");
  if (claims == nullptr) {
    return out;
  }
  if (!claims->is_array()) {
    return common::InvalidArgument("spec.resourceClaims must be a list");
  }
  std::map<std::string, std::string> generated;  // status.resourceClaimStatuses: pod claim name -> claim name
  if (const json* status = Find(pod, "status"); status != nullptr) {
    if (const json* statuses = Find(*status, "resourceClaimStatuses"); statuses != nullptr && statuses->is_array()) {
      for (const auto& s : *statuses) {
        if (s.contains("name") && s["name"].is_string() && s.contains("resourceClaimName") &&
            s["resourceClaimName"].is_string()) {
          generated[s["name"].get<std::string>()] = s["resourceClaimName"].get<std::string>();
        }
      }
    }
  }
  for (size_t i = 0; i < claims->size(); ++i) {
    const json& c = (*claims)[i];
    const std::string at = "spec.resourceClaims[" + std::to_string(i) + "]";
    auto name = String(c, "name", at, true);
    auto claim_name = String(c, "resourceClaimName", at);
    auto template_name = String(c, "resourceClaimTemplateName", at);
    for (const auto* f : {&name, &claim_name, &template_name}) {
      if (!f->ok()) {
        return f->status();
      }
    }
    if (claim_name->empty() == template_name->empty()) {
      return common::InvalidArgument(at + " must set exactly one of resourceClaimName and resourceClaimTemplateName");
    }
    PodClaimRef ref{.pod_claim_name = *name, .from_template = !template_name->empty()};
    if (ref.from_template) {
      auto it = generated.find(*name);
      ref.claim_name = it == generated.end() ? std::string() : it->second;
    } else {
      ref.claim_name = *claim_name;
    }
    out.push_back(std::move(ref));
  }
  return out;
}

}  // namespace gpusched::kube
