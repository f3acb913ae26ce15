#include "gpusched/webhook/handler.h"

#include <algorithm>
#include <cctype>

#include "gpusched/webhook/admission_review.h"
#include "gpusched/webhook/mutator.h"
#include "gpusched/webhook/validator.h"

namespace gpusched::webhook {
namespace {

// "application/json; charset=utf-8" -> "application/json", lower case.
std::string MediaType(std::string_view content_type) {
  std::string out;
  for (char c : content_type.substr(0, content_type.find(';'))) {
    if (c != ' ' && c != '\t') {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

// Log lines hold bytes from the request body, which anyone who reaches the port can send: one line each, bounded.
std::string ForLog(std::string s) {
  constexpr size_t kMaxLogBytes = 1000;
  if (s.size() > kMaxLogBytes) {
    s.resize(kMaxLogBytes);
    s += "...";
  }
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      c = ' ';
    }
  }
  return s;
}

HandlerReply Text(int status, std::string message, Outcome outcome) {
  return HandlerReply{.status = status,
                      .content_type = "text/plain; charset=utf-8",
                      .body = message + "\n",
                      .outcome = outcome,
                      .summary = ForLog(std::move(message))};
}

std::string Describe(const AdmissionRequest& r) {
  std::string out = std::string(OperationName(r.operation)) + " " + r.resource.resource;
  if (!r.sub_resource.empty()) {
    out += "/" + r.sub_resource;
  }
  out += " " + (r.namespace_name.empty() ? "" : r.namespace_name + "/") + (r.name.empty() ? "(generated)" : r.name);
  return out + " by " + r.user.username;
}

// object.metadata[key] when it is a string, else "".
std::string MetadataString(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) {
    return {};
  }
  auto m = object.find("metadata");
  if (m == object.end() || !m->is_object()) {
    return {};
  }
  auto v = m->find(key);
  return v != m->end() && v->is_string() ? v->get<std::string>() : std::string();
}

// A DNS subdomain (RFC 1123) of at most `max` characters, as Kubernetes requires of namespace and pod names.
bool KubernetesName(std::string_view s, size_t max) {
  if (s.empty() || s.size() > max || s.front() == '-' || s.front() == '.' || s.back() == '-' || s.back() == '.') {
    return false;
  }
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.'; });
}

}  // namespace

bool TellIfReal(const HandlerReply& reply, bool caller_is_apiserver, const PodGetter& get_pod,
                ports::EventRecorder& recorder) {
  if (!reply.event.has_value()) {
    return false;
  }
  const ports::PodEvent& e = *reply.event;
  if (!KubernetesName(e.namespace_, 63) || !KubernetesName(e.name, 253)) {
    return false;
  }
  if (!caller_is_apiserver) {
    if (e.uid.empty() || reply.event_resource_version.empty() || !get_pod) {
      return false;
    }
    auto live = get_pod(e.namespace_, e.name);
    if (!live.ok() || MetadataString(*live, "uid") != e.uid ||
        MetadataString(*live, "resourceVersion") != reply.event_resource_version) {
      return false;
    }
  }
  recorder.Record(e);
  return true;
}

const char* EndpointName(Endpoint endpoint) { return endpoint == Endpoint::kValidate ? "validate" : "mutate"; }

const char* OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kAllowed:
      return "allowed";
    case Outcome::kPatched:
      return "patched";
    case Outcome::kDenied:
      return "denied";
    case Outcome::kBadRequest:
      return "bad_request";
    case Outcome::kThrottled:
      return "throttled";
  }
  return "unknown";
}

std::optional<DecodeLimiter::Slot> DecodeLimiter::TryAcquire(size_t body_bytes) {
  if (body_bytes <= large_body_bytes_) {
    return Slot();
  }
  if (in_flight_.fetch_add(1) >= max_large_) {
    in_flight_.fetch_sub(1);
    return std::nullopt;
  }
  return Slot(&in_flight_);
}

HandlerReply HandleAdmission(Endpoint endpoint, std::string_view content_type, std::string_view body,
                             const WebhookConfig& config, const HandlerOptions& options) {
  if (!content_type.empty() && MediaType(content_type) != "application/json") {
    return Text(415, "Content-Type must be application/json, got \"" + std::string(content_type.substr(0, 100)) + "\"",
                Outcome::kBadRequest);
  }
  // The bounds first: a body they refuse costs one pass over its bytes and never waits for a decoding slot.
  if (auto bounds = CheckReviewBounds(body); !bounds.ok()) {
    return Text(400, bounds.message(), Outcome::kBadRequest);
  }
  const std::optional<DecodeLimiter::Slot> slot = options.limiter != nullptr
                                                      ? options.limiter->TryAcquire(body.size())
                                                      : std::optional<DecodeLimiter::Slot>(std::in_place);
  if (!slot.has_value()) {
    HandlerReply busy = Text(
        429, "too many large admission reviews at once (" + std::to_string(body.size()) + " bytes); retry in a second",
        Outcome::kThrottled);
    busy.retry_after_s = 1;
    return busy;
  }
  auto request = DecodeAdmissionReview(body);
  if (!request.ok()) {
    return Text(400, request.status().message(), Outcome::kBadRequest);
  }
  const AdmissionResponse response =
      endpoint == Endpoint::kValidate ? Validate(*request, config, options.queues) : Mutate(*request, config);
  HandlerReply reply{.body = EncodeAdmissionReview(*request, response)};
  if (!response.allowed) {
    reply.outcome = Outcome::kDenied;
    reply.summary = ForLog(Describe(*request) + ": denied: " + response.message);
    const bool existing_pod = request->resource.group.empty() && request->resource.resource == "pods" &&
                              !request->name.empty() && !request->namespace_name.empty() &&
                              (request->operation == Operation::kUpdate || request->sub_resource == "binding");
    if (existing_pod && !request->dry_run && !response.event_message.empty()) {
      reply.event = ports::PodEvent{
          .namespace_ = request->namespace_name,
          .name = request->name,
          .uid = MetadataString(request->old_object, "uid"),
          .type = "Warning",
          .reason = "AdmissionDenied",
          .message =
              ForLog("gpusched webhook denied " + std::string(OperationName(request->operation)) + " " +
                     request->resource.resource + (request->sub_resource.empty() ? "" : "/" + request->sub_resource) +
                     ": " + response.event_message)};
      reply.event_resource_version = MetadataString(request->old_object, "resourceVersion");
    }
  } else if (!response.patch.is_null()) {
    reply.outcome = Outcome::kPatched;
    reply.summary = ForLog(Describe(*request) + ": patched: " +
                           response.patch.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  return reply;
}

}  // namespace gpusched::webhook
