#include "gpusched/webhook/handler.h"

#include <string>

#include <gtest/gtest.h>

#include "gpusched/webhook/review_builders_test_util.h"

namespace gpusched::webhook {
namespace {

using namespace test;  // NOLINT(google-build-using-namespace): builders

std::string Review(const json& pod, const std::string& user = kAlice) {
  return json{{"apiVersion", "admission.k8s.io/v1"},
              {"kind", "AdmissionReview"},
              {"request",
               {{"uid", "u-42"},
                {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                {"operation", "CREATE"},
                {"namespace", "team-a"},
                {"name", "trainer"},
                {"userInfo", {{"username", user}, {"groups", {"system:authenticated"}}}},
                {"object", pod}}}}
      .dump();
}

TEST(HandlerTest, AnswersEachOutcome) {
  const WebhookConfig config;
  struct Case {
    std::string name;
    Endpoint endpoint;
    std::string content_type;
    std::string body;
    int want_status;
    Outcome want_outcome;
    std::string want_in_body;
    std::string want_in_summary;
  };
  const Case cases[] = {
      {"allowed", Endpoint::kValidate, "application/json", Review(PodJson().Limits({{"cpu", "1"}})), 200,
       Outcome::kAllowed, R"("allowed":true)", ""},
      {"denied: a 200 carrying allowed false", Endpoint::kValidate, "application/json; charset=utf-8",
       Review(PodJson().Annotation("gpusched.io/allocation", "{}")), 200, Outcome::kDenied, R"("allowed":false)",
       "CREATE pods team-a/trainer by alice: denied: user \"alice\" may not set"},
      {"patched", Endpoint::kMutate, "", Review(PodJson().Limits({{"aliyun.com/gpu-mem", "8"}})), 200,
       Outcome::kPatched, R"("patchType":"JSONPatch")", "CREATE pods team-a/trainer by alice: patched: [{"},
      {"the same pod at /validate is not patched", Endpoint::kValidate, "",
       Review(PodJson().Limits({{"aliyun.com/gpu-mem", "8"}})), 200, Outcome::kAllowed, R"("uid":"u-42")", ""},
      {"not JSON", Endpoint::kValidate, "application/json", "{", 400, Outcome::kBadRequest, "not valid JSON",
       "not valid JSON"},
      {"not a review", Endpoint::kMutate, "application/json", R"({"kind":"Pod"})", 400, Outcome::kBadRequest,
       "apiVersion must be", "apiVersion must be"},
      {"another media type", Endpoint::kValidate, "application/yaml", "kind: AdmissionReview", 415,
       Outcome::kBadRequest, "Content-Type must be application/json", "application/yaml"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const HandlerReply r = HandleAdmission(c.endpoint, c.content_type, c.body, config);
    EXPECT_EQ(r.status, c.want_status);
    EXPECT_EQ(r.outcome, c.want_outcome);
    EXPECT_NE(r.body.find(c.want_in_body), std::string::npos) << r.body;
    EXPECT_NE(r.summary.find(c.want_in_summary), std::string::npos) << r.summary;
    EXPECT_EQ(r.content_type.rfind(c.want_status == 200 ? "application/json" : "text/plain", 0), 0u);
  }
}

// A denial about a pod that exists (here: alice changing the allocation annotation of a running pod) is for that
// pod to hear; a denied CREATE has no pod yet, an allowed request nothing to tell, a dry run changes nothing.
TEST(HandlerTest, DenialsOfExistingPodsAreToldToThePod) {
  const WebhookConfig config;
  json old_pod = PodJson().Annotation("gpusched.io/allocation", R"({"node":"n"})");
  old_pod["metadata"]["uid"] = "pod-uid-7";
  json changed = old_pod;
  changed["metadata"]["annotations"]["gpusched.io/allocation"] = R"({"node":"m"})";
  auto review = [](const json& old_object, const json& object, const std::string& operation, bool dry_run) {
    return json{{"apiVersion", "admission.k8s.io/v1"},
                {"kind", "AdmissionReview"},
                {"request",
                 {{"uid", "u-43"},
                  {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                  {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                  {"operation", operation},
                  {"namespace", "team-a"},
                  {"name", "trainer"},
                  {"dryRun", dry_run},
                  {"userInfo", {{"username", "alice"}, {"groups", {"system:authenticated"}}}},
                  {"object", object},
                  {"oldObject", old_object}}}}
        .dump();
  };
  const HandlerReply denied =
      HandleAdmission(Endpoint::kValidate, "application/json", review(old_pod, changed, "UPDATE", false), config);
  ASSERT_EQ(denied.outcome, Outcome::kDenied) << denied.body;
  ASSERT_TRUE(denied.event.has_value());
  EXPECT_EQ(denied.event->namespace_, "team-a");
  EXPECT_EQ(denied.event->name, "trainer");
  EXPECT_EQ(denied.event->uid, "pod-uid-7");
  EXPECT_EQ(denied.event->type, "Warning");
  EXPECT_EQ(denied.event->reason, "AdmissionDenied");
  EXPECT_EQ(denied.event->message.rfind("gpusched webhook denied UPDATE pods team-a/trainer by alice: ", 0), 0U)
      << denied.event->message;
  EXPECT_NE(denied.event->message.find("may not change"), std::string::npos) << denied.event->message;

  EXPECT_FALSE(
      HandleAdmission(Endpoint::kValidate, "application/json", review(old_pod, changed, "UPDATE", true), config)
          .event.has_value());  // dry run
  EXPECT_FALSE(
      HandleAdmission(Endpoint::kValidate, "application/json", review(nullptr, changed, "CREATE", false), config)
          .event.has_value());  // no pod yet
  EXPECT_FALSE(
      HandleAdmission(Endpoint::kValidate, "application/json", review(old_pod, old_pod, "UPDATE", false), config)
          .event.has_value());  // allowed
}

TEST(HandlerTest, LogSummariesAreOneBoundedLine) {
  const HandlerReply r = HandleAdmission(
      Endpoint::kValidate, "", Review(PodJson().Annotation("gpusched.io/allocation", "{}"), "mallory\nINFO fake line"),
      WebhookConfig{});
  ASSERT_EQ(r.outcome, Outcome::kDenied);
  EXPECT_EQ(r.summary.find('\n'), std::string::npos) << r.summary;

  const HandlerReply big = HandleAdmission(
      Endpoint::kValidate, "", Review(PodJson().Annotation("gpusched.io/allocation", "{}"), std::string(5000, 'm')),
      WebhookConfig{});
  EXPECT_LE(big.summary.size(), 1003u);
}

TEST(HandlerTest, Names) {
  EXPECT_STREQ(EndpointName(Endpoint::kMutate), "mutate");
  EXPECT_STREQ(OutcomeName(Outcome::kBadRequest), "bad_request");
}

}  // namespace
}  // namespace gpusched::webhook
