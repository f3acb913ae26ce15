// Fuzz target: the webhook's AdmissionReview decoder and both admission rules, on inputs up to the server's body
// limit (scripts/fuzz.sh runs it with -max_len 4 MiB). Whatever the bytes, nothing crashes, a review that decodes
// nests at most kMaxNestingDepth deep, no unverified review writes an Event;
// for a review that decodes, the answer is a JSON AdmissionReview echoing the uid, a denial has a reason, the
// mutating patch applies to the object (RFC 6902, as the API server applies it), running the mutation again on the
// patched object patches nothing (reinvocation is safe), and a pod the validating rules admitted stays admitted
// after the patch.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include <functional>

#include "gpusched/webhook/admission_review.h"
#include "gpusched/webhook/handler.h"
#include "gpusched/webhook/mutator.h"
#include "gpusched/webhook/validator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusched::webhook;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  WebhookConfig config;
  config.scheduler_names = {{"team-a", "gpusched"}, {"default", "gpusched"}};
  config.allowed_groups = {"gpusched-admins"};
  static const QueueView queues({{.name = "team-a", .namespaces = {"team-a"}},
                                 {.name = "team-b", .namespaces = {"team-b"}},
                                 {.name = "research"},
                                 {.name = "lab", .parent = "research", .namespaces = {"lab"}}});
  static DecodeLimiter limiter(2, 64 * 1024);
  const HandlerOptions options{.limiter = &limiter, .queues = &queues};
  for (Endpoint e : {Endpoint::kValidate, Endpoint::kMutate}) {
    const HandlerReply reply = HandleAdmission(e, "application/json", body, config, options);
    if (reply.status != 200 && reply.status != 400) {
      std::abort();
    }
    // An Event is only ever proposed with the rule's own words, and a review nobody verified writes none.
    struct Sink : gpusched::ports::EventRecorder {
      void Record(gpusched::ports::PodEvent) override { std::abort(); }
    } sink;
    if (TellIfReal(reply, false, nullptr, sink)) {
      std::abort();
    }
  }
  auto request = DecodeAdmissionReview(body);
  if (!request.ok()) {
    return 0;
  }
  // Within the bounds: no deeper than kMaxNestingDepth, object and oldObject an object or null.
  const std::function<int(const nlohmann::json&)> depth = [&](const nlohmann::json& j) {
    int d = 0;
    if (j.is_structured()) {
      for (const auto& v : j) {
        d = std::max(d, depth(v));
      }
      ++d;
    }
    return d;
  };
  for (const nlohmann::json* o : {&request->object, &request->old_object}) {
    if (depth(*o) > kMaxNestingDepth || !(o->is_object() || o->is_null())) {
      std::abort();
    }
  }
  const AdmissionResponse validated = Validate(*request, config, &queues);
  const AdmissionResponse mutated = Mutate(*request, config);
  if (!mutated.allowed || (!validated.allowed && validated.message.empty()) || !validated.patch.is_null()) {
    std::abort();
  }
  for (const AdmissionResponse* r : {&validated, &mutated}) {
    auto answer = nlohmann::json::parse(EncodeAdmissionReview(*request, *r), nullptr, false);
    if (answer.is_discarded() || answer["response"]["uid"] != request->uid ||
        answer["response"]["allowed"] != r->allowed) {
      std::abort();
    }
  }
  if (mutated.patch.is_null()) {
    return 0;
  }
  AdmissionRequest again = *request;
  try {
    again.object = request->object.patch(mutated.patch);
  } catch (const nlohmann::json::exception&) {
    std::abort();  // the API server would refuse the patch: every GPU pod's creation would fail
  }
  if (!Mutate(again, config).patch.is_null()) {
    std::abort();
  }
  if (validated.allowed && !Validate(again, config, &queues).allowed) {
    std::abort();
  }
  return 0;
}
