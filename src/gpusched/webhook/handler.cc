#include "gpusched/webhook/handler.h"

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

}  // namespace

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
  }
  return "unknown";
}

HandlerReply HandleAdmission(Endpoint endpoint, std::string_view content_type, std::string_view body,
                             const WebhookConfig& config) {
  if (!content_type.empty() && MediaType(content_type) != "application/json") {
    return Text(415, "Content-Type must be application/json, got \"" + std::string(content_type.substr(0, 100)) + "\"",
                Outcome::kBadRequest);
  }
  auto request = DecodeAdmissionReview(body);
  if (!request.ok()) {
    return Text(400, request.status().message(), Outcome::kBadRequest);
  }
  const AdmissionResponse response =
      endpoint == Endpoint::kValidate ? Validate(*request, config) : Mutate(*request, config);
  HandlerReply reply{.body = EncodeAdmissionReview(*request, response)};
  if (!response.allowed) {
    reply.outcome = Outcome::kDenied;
    reply.summary = ForLog(Describe(*request) + ": denied: " + response.message);
    const bool existing_pod = request->resource.group.empty() && request->resource.resource == "pods" &&
                              !request->name.empty() && !request->namespace_name.empty() &&
                              (request->operation == Operation::kUpdate || request->sub_resource == "binding");
    if (existing_pod && !request->dry_run) {
      std::string uid;
      if (const nlohmann::json* m = request->old_object.is_object() ? &request->old_object : nullptr;
          m != nullptr && m->contains("metadata") && (*m)["metadata"].is_object() && (*m)["metadata"].contains("uid") &&
          (*m)["metadata"]["uid"].is_string()) {
        uid = (*m)["metadata"]["uid"].get<std::string>();
      }
      reply.event =
          ports::PodEvent{.namespace_ = request->namespace_name,
                          .name = request->name,
                          .uid = std::move(uid),
                          .type = "Warning",
                          .reason = "AdmissionDenied",
                          .message = ForLog("gpusched webhook denied " + Describe(*request) + ": " + response.message)};
    }
  } else if (!response.patch.is_null()) {
    reply.outcome = Outcome::kPatched;
    reply.summary = ForLog(Describe(*request) + ": patched: " +
                           response.patch.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  return reply;
}

}  // namespace gpusched::webhook
