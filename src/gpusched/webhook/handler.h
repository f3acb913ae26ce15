#pragma once

// One admission call over HTTP, without the HTTP: the body kube-apiserver POSTed to /validate or /mutate in, the
// status code and body to answer out. The server (cli/webhook_command.cc) only moves bytes.
//
//   Content-Type other than application/json (when given)   415, text naming it
//   a body DecodeAdmissionReview refuses                      400, text with its reason
//   otherwise                                                 200, the AdmissionReview answering it (allowed or
//                                                             denied; a denial is a 200 on the wire)

#include <optional>
#include <string>
#include <string_view>

#include "gpusched/ports/event_recorder.h"
#include "gpusched/webhook/webhook_config.h"

namespace gpusched::webhook {

enum class Endpoint { kValidate, kMutate };
enum class Outcome { kAllowed, kPatched, kDenied, kBadRequest };

[[nodiscard]] const char* EndpointName(Endpoint endpoint);  // "validate", "mutate"
[[nodiscard]] const char* OutcomeName(Outcome outcome);     // "allowed", "patched", "denied", "bad_request"

struct HandlerReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  Outcome outcome = Outcome::kAllowed;
  // For the log: "CREATE pods team-a/trainer by alice: <reason>" for denials, patches and bad requests; "" else.
  std::string summary;
  // A denial that concerns a pod that exists (an UPDATE of it or of its status, a Binding of it), to be told to that
  // pod as a Warning Event, reason AdmissionDenied. A denied CREATE of a pod has no pod to tell: its creator gets the
  // answer (and a controller writes it into its own FailedCreate event).
  std::optional<ports::PodEvent> event;
};

[[nodiscard]] HandlerReply HandleAdmission(Endpoint endpoint, std::string_view content_type, std::string_view body,
                                           const WebhookConfig& config);

}  // namespace gpusched::webhook
