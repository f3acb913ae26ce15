#include "gpusched/adapters/k8s/lease_lock.h"

#include <cstdio>
#include <ctime>
#include <utility>

#include <nlohmann/json.hpp>

namespace gpusched::adapters::k8s {

std::string FormatMicroTime(int64_t wall_ms) {
  const time_t secs = static_cast<time_t>(wall_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>((wall_ms % 1000) * 1000));
  return buf;
}

common::Result<int64_t> ParseMicroTime(const std::string& text) {
  std::tm tm{};
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &consumed) != 6 ||
      consumed != 19) {
    return common::InvalidArgument("not an RFC 3339 time: \"" + text + "\"");
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  int64_t ms = static_cast<int64_t>(timegm(&tm)) * 1000;
  size_t i = 19;
  if (i < text.size() && text[i] == '.') {
    int64_t frac = 0;
    int digits = 0;
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++digits) {
      if (digits < 3) {
        frac = frac * 10 + (text[i] - '0');
      }
    }
    for (int d = digits; d < 3; ++d) {
      frac *= 10;
    }
    ms += frac;
  }
  if (i < text.size() && (text[i] == '+' || text[i] == '-') && i + 6 == text.size()) {
    const int hours = (text[i + 1] - '0') * 10 + (text[i + 2] - '0');
    const int minutes = (text[i + 4] - '0') * 10 + (text[i + 5] - '0');
    const int64_t offset = (int64_t{hours} * 60 + minutes) * 60 * 1000;
    ms += text[i] == '+' ? -offset : offset;
    i = text.size();
  } else if (i < text.size() && text[i] == 'Z') {
    ++i;
  }
  if (i != text.size()) {
    return common::InvalidArgument("not an RFC 3339 time: \"" + text + "\"");
  }
  return ms;
}

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
