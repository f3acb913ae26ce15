#pragma once

// One admission call over HTTP, without the HTTP: the body kube-apiserver POSTed to /validate or /mutate in, the
// status code and body to answer out. The server (cli/webhook_command.cc) only moves bytes.
//
//   Content-Type other than application/json (when given)   415, text naming it
//   a body past CheckReviewBounds (too deep, too many values) 400, text with its reason (before any slot is taken)
//   a large body while DecodeLimiter's large slots are taken  429, Retry-After: 1 (kube-apiserver's webhook client
//                                                             retries an answer that carries it)
//   a body DecodeAdmissionReview refuses                      400, text with its reason
//   otherwise                                                 200, the AdmissionReview answering it (allowed or
//                                                             denied; a denial is a 200 on the wire)

#include <atomic>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "gpusched/common/status.h"
#include "gpusched/ports/event_recorder.h"
#include "gpusched/webhook/queue_membership.h"
#include "gpusched/webhook/webhook_config.h"

namespace gpusched::webhook {

enum class Endpoint { kValidate, kMutate };
enum class Outcome { kAllowed, kPatched, kDenied, kBadRequest, kThrottled };
inline constexpr size_t kOutcomes = 5;

[[nodiscard]] const char* EndpointName(Endpoint endpoint);  // "validate", "mutate"
// "allowed", "patched", "denied", "bad_request", "throttled"
[[nodiscard]] const char* OutcomeName(Outcome outcome);

// At most `max_large` reviews whose body is over `large_body_bytes` decode at once: a large review may take tens of
// MiB while it is decoded and judged (DecodeAdmissionReview's bounds), and the Deployment's memory limit must hold
// whatever the callers send. The others are answered 429 at once, never queued. Smaller reviews (every real pod is a
// few KiB) are never held up: at most one per handler thread, each bounded by its size. Thread-safe.
class DecodeLimiter {
 public:
  explicit DecodeLimiter(size_t max_large = 2, size_t large_body_bytes = 64 * 1024)
      : max_large_(max_large), large_body_bytes_(large_body_bytes) {}

  // Held while a review decodes; releases its slot when destroyed.
  class Slot {
   public:
    Slot() = default;
    explicit Slot(std::atomic<size_t>* in_flight) : in_flight_(in_flight) {}
    Slot(Slot&& other) noexcept : in_flight_(std::exchange(other.in_flight_, nullptr)) {}
    Slot& operator=(Slot&&) = delete;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() {
      if (in_flight_ != nullptr) {
        in_flight_->fetch_sub(1);
      }
    }

   private:
    std::atomic<size_t>* in_flight_ = nullptr;
  };

  // A slot for a body of `body_bytes` (a small one takes none); nullopt when every large slot is taken.
  [[nodiscard]] std::optional<Slot> TryAcquire(size_t body_bytes);
  [[nodiscard]] size_t large_in_flight() const { return in_flight_.load(); }

 private:
  const size_t max_large_;
  const size_t large_body_bytes_;
  std::atomic<size_t> in_flight_{0};
};

struct HandlerOptions {
  DecodeLimiter* limiter = nullptr;   // null: no limit (tests, the fuzz target)
  const QueueView* queues = nullptr;  // null: the queue rule is off (validator.h, rule 5)
};

struct HandlerReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  Outcome outcome = Outcome::kAllowed;
  // For the log: "CREATE pods team-a/trainer by alice: <reason>" for denials, patches and bad requests; "" else.
  std::string summary;
  // A denial that concerns a pod that exists (an UPDATE of it or of its status, a Binding of it), that may be told
  // to that pod as a Warning Event, reason AdmissionDenied, once TellIfReal has checked it is real: anyone who
  // reaches the port can POST a review naming any pod. A denied CREATE of a pod has no pod to tell: its creator gets
  // the answer (and a controller writes it into its own FailedCreate event). The message is the rule's
  // event_message, never text from the request.
  std::optional<ports::PodEvent> event;
  std::string event_resource_version;  // oldObject's metadata.resourceVersion; "" for a Binding
  int retry_after_s = 0;               // with 429: the Retry-After header
};

[[nodiscard]] HandlerReply HandleAdmission(Endpoint endpoint, std::string_view content_type, std::string_view body,
                                           const WebhookConfig& config, const HandlerOptions& options = {});

// GETs a pod (namespace, name): the live object, or an error (NotFound, the API unreachable...).
using PodGetter = std::function<common::Result<nlohmann::json>(const std::string& ns, const std::string& name)>;

// Writes reply.event to `recorder` only when the review is verifiably about what the cluster did, and says whether
// it did:
//   * `caller_is_apiserver`: the caller presented a client certificate that the server verified against
//     --client-ca and whose name is in --apiserver-client-names (kube-apiserver's, from its AdmissionConfiguration):
//     the review is the API server's; or else
//   * the pod it names, fetched with `get_pod`, is live and has oldObject's uid and resourceVersion (so the review
//     is about the pod as it is now, not an invented one; a Binding, which carries neither, needs the certificate).
// Namespace and name must be valid Kubernetes names before anything is fetched. Anything else writes nothing.
bool TellIfReal(const HandlerReply& reply, bool caller_is_apiserver, const PodGetter& get_pod,
                ports::EventRecorder& recorder);

}  // namespace gpusched::webhook
