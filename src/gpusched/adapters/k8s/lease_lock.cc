#include "gpusched/adapters/k8s/lease_lock.h"

#include <utility>

#include <nlohmann/json.hpp>

namespace gpusched::adapters::k8s {

LeaseLock::LeaseLock(ApiClient& client, std::string ns, std::string name)
    : client_(client), ns_(std::move(ns)), name_(std::move(name)) {}

std::string LeaseLock::Describe() const { return "Lease " + ns_ + "/" + name_; }

nlohmann::json LeaseLock::ToLease(const ports::LeaderRecord& record) const {
  const int64_t seconds = (record.lease_duration_ms + 999) / 1000;
  nlohmann::json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                          {"kind", "Lease"},
                          {"metadata", {{"name", name_}, {"namespace", ns_}}},
                          {"spec",
                           {{"holderIdentity", record.holder},
                            {"leaseDurationSeconds", seconds},
                            {"acquireTime", FormatMicroTime(record.acquire_wall_ms)},
                            {"renewTime", FormatMicroTime(record.renew_wall_ms)},
                            {"leaseTransitions", record.transitions}}}};
  if (!resource_version_.empty()) {
    lease["metadata"]["resourceVersion"] = resource_version_;
  }
  return lease;
}

common::Result<ports::LeaderRecord> LeaseLock::Remember(const nlohmann::json& lease) {
  if (!lease.is_object() || !lease.contains("metadata") || !lease["metadata"].is_object()) {
    return common::Internal(Describe() + ": the server answered with no object");
  }
  const nlohmann::json& meta = lease["metadata"];
  resource_version_ = meta.value("resourceVersion", std::string());
  ports::LeaderRecord r;
  r.version = resource_version_;
  const nlohmann::json spec = lease.value("spec", nlohmann::json::object());
  if (!spec.is_object()) {
    return common::Internal(Describe() + ": spec is not an object");
  }
  try {
    if (spec.contains("holderIdentity") && spec["holderIdentity"].is_string()) {
      r.holder = spec["holderIdentity"].get<std::string>();
    }
    r.lease_duration_ms = int64_t{spec.value("leaseDurationSeconds", 0)} * 1000;
    r.transitions = spec.value("leaseTransitions", 0);
    for (auto [key, field] : {std::pair{"acquireTime", &r.acquire_wall_ms}, std::pair{"renewTime", &r.renew_wall_ms}}) {
      if (spec.contains(key) && spec[key].is_string()) {
        auto t = ParseMicroTime(spec[key].get<std::string>());
        if (!t.ok()) {
          return common::Internal(Describe() + ": spec." + key + ": " + t.status().message());
        }
        *field = *t;
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return common::Internal(Describe() + ": malformed spec: " + e.what());
  }
  return r;
}

common::Result<ports::LeaderRecord> LeaseLock::Get() {
  auto lease = client_.GetLease(ns_, name_);
  if (!lease.ok()) {
    return lease.status();
  }
  return Remember(*lease);
}

common::Status LeaseLock::Create(const ports::LeaderRecord& record) {
  resource_version_.clear();
  auto lease = client_.CreateLease(ns_, ToLease(record));
  if (!lease.ok()) {
    return lease.status();
  }
  return Remember(*lease).status();
}

common::Status LeaseLock::Update(const ports::LeaderRecord& record) {
  auto lease = client_.UpdateLease(ns_, ToLease(record));
  if (!lease.ok()) {
    return lease.status();
  }
  return Remember(*lease).status();
}

}  // namespace gpusched::adapters::k8s
