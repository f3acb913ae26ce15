// Fuzz target: the webhook's AdmissionReview decoder and both admission rules. Whatever the bytes, nothing crashes;
// for a review that decodes, the answer is a JSON AdmissionReview echoing the uid, a denial has a reason, the
// mutating patch applies to the object (RFC 6902, as the API server applies it), running the mutation again on the
// patched object patches nothing (reinvocation is safe), and a pod the validating rules admitted stays admitted
// after the patch.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

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
  for (Endpoint e : {Endpoint::kValidate, Endpoint::kMutate}) {
    const HandlerReply reply = HandleAdmission(e, "application/json", body, config);
    if (reply.status != 200 && reply.status != 400) {
      std::abort();
    }
  }
  auto request = DecodeAdmissionReview(body);
  if (!request.ok()) {
    return 0;
  }
  const AdmissionResponse validated = Validate(*request, config);
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
  if (validated.allowed && !Validate(again, config).allowed) {
    std::abort();
  }
  return 0;
}
