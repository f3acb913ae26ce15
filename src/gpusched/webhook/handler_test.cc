#include "gpusched/webhook/handler.h"

#include <string>
#include <vector>

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
  EXPECT_EQ(denied.event_resource_version, "");  // old_pod has none
  EXPECT_EQ(denied.event->type, "Warning");
  EXPECT_EQ(denied.event->reason, "AdmissionDenied");
  // Fixed words from the rule: not the user, whom only a verified review names truly.
  EXPECT_EQ(denied.event->message,
            "gpusched webhook denied UPDATE pods: a request to change its annotation gpusched.io/allocation was "
            "denied: only gpusched's scheduler writes it (the webhook's log names the user)");
  EXPECT_EQ(denied.event->message.find("alice"), std::string::npos);

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

class RecordingRecorder : public ports::EventRecorder {
 public:
  void Record(ports::PodEvent event) override { events.push_back(std::move(event)); }
  std::vector<ports::PodEvent> events;
};

// A review POSTed straight to the port (not by kube-apiserver) names a real pod and a denied change to it: no Event
// may come of it unless the review is about the pod as it is (uid and resourceVersion of the live object) or came
// from the verified API server.
TEST(HandlerTest, ForgedReviewsWriteNoEvent) {
  const WebhookConfig config;
  json live = PodJson().Annotation("gpusched.io/allocation", R"({"node":"n"})");
  live["metadata"]["uid"] = "pod-uid-7";
  live["metadata"]["resourceVersion"] = "1234";
  auto review = [](const json& old_object, const std::string& ns, const std::string& name, const std::string& user) {
    json changed = old_object;
    changed["metadata"]["annotations"]["gpusched.io/allocation"] = R"({"node":"m"})";
    return json{{"apiVersion", "admission.k8s.io/v1"},
                {"kind", "AdmissionReview"},
                {"request",
                 {{"uid", "u-44"},
                  {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                  {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                  {"operation", "UPDATE"},
                  {"namespace", ns},
                  {"name", name},
                  {"userInfo", {{"username", user}}},
                  {"object", changed},
                  {"oldObject", old_object}}}}
        .dump();
  };
  int gets = 0;
  const PodGetter api = [&](const std::string& ns, const std::string& name) -> common::Result<json> {
    ++gets;
    if (ns == "team-a" && name == "trainer") {
      return live;
    }
    return common::NotFound("pods \"" + name + "\" not found");
  };
  auto tell = [&](const std::string& body, bool from_apiserver) {
    RecordingRecorder recorder;
    const HandlerReply r = HandleAdmission(Endpoint::kValidate, "application/json", body, config);
    EXPECT_EQ(r.outcome, Outcome::kDenied) << r.body;
    const bool told = TellIfReal(r, from_apiserver, api, recorder);
    EXPECT_EQ(told, recorder.events.size() == 1);
    return recorder.events;
  };

  // The genuine review: oldObject is the live pod.
  auto events = tell(review(live, "team-a", "trainer", "alice"), false);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].uid, "pod-uid-7");

  // Forged: an old uid, an old resourceVersion, no resourceVersion, a pod that does not exist.
  json stale_uid = live;
  stale_uid["metadata"]["uid"] = "other-uid";
  EXPECT_TRUE(tell(review(stale_uid, "team-a", "trainer", "mallory"), false).empty());
  json stale_rv = live;
  stale_rv["metadata"]["resourceVersion"] = "1200";
  EXPECT_TRUE(tell(review(stale_rv, "team-a", "trainer", "mallory"), false).empty());
  json no_rv = live;
  no_rv["metadata"].erase("resourceVersion");
  const int gets_before = gets;
  EXPECT_TRUE(tell(review(no_rv, "team-a", "trainer", "mallory"), false).empty());
  EXPECT_EQ(gets, gets_before);  // nothing to compare: not even fetched
  EXPECT_TRUE(tell(review(live, "team-a", "ghost", "mallory"), false).empty());
  // Names that are no Kubernetes name are never put in a path.
  EXPECT_TRUE(tell(review(live, "team-a", "../../secrets/x", "mallory"), false).empty());
  EXPECT_TRUE(tell(review(live, "team-a", "../../secrets/x", "mallory"), true).empty());
  // The attacker's text never reaches the Event, even when it is written.
  events = tell(review(live, "team-a", "trainer", "mallory: your GPUs are revoked, see evil.example"), false);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].message.find("evil"), std::string::npos) << events[0].message;

  // From the verified API server: written without a GET, whatever the pod became since.
  const int gets_now = gets;
  EXPECT_EQ(tell(review(stale_rv, "team-a", "trainer", "alice"), true).size(), 1u);
  EXPECT_EQ(gets, gets_now);
  // No getter (no API): only the verified caller's.
  RecordingRecorder recorder;
  const HandlerReply r =
      HandleAdmission(Endpoint::kValidate, "application/json", review(live, "team-a", "trainer", "alice"), config);
  EXPECT_FALSE(TellIfReal(r, false, nullptr, recorder));
  EXPECT_TRUE(recorder.events.empty());
}

// At most max_large reviews over the size decode at once; the next large one gets 429 with Retry-After, small ones
// go through, and a slot given back is usable again.
TEST(HandlerTest, LargeReviewsDecodeAtMostTwoAtOnce) {
  DecodeLimiter limiter(2, 1000);
  const std::string small = Review(PodJson().Limits({{"cpu", "1"}}));
  ASSERT_LT(small.size(), 1000u);
  const std::string large = Review(PodJson().Annotation("note", std::string(5000, 'x')));
  const HandlerOptions options{.limiter = &limiter};
  EXPECT_EQ(HandleAdmission(Endpoint::kValidate, "", large, WebhookConfig{}, options).status, 200);
  {
    auto first = limiter.TryAcquire(large.size());
    auto second = limiter.TryAcquire(large.size());
    ASSERT_TRUE(first.has_value() && second.has_value());
    EXPECT_EQ(limiter.large_in_flight(), 2u);
    const HandlerReply busy = HandleAdmission(Endpoint::kValidate, "", large, WebhookConfig{}, options);
    EXPECT_EQ(busy.status, 429);
    EXPECT_EQ(busy.outcome, Outcome::kThrottled);
    EXPECT_EQ(busy.retry_after_s, 1);
    EXPECT_NE(busy.body.find("too many large admission reviews"), std::string::npos);
    EXPECT_EQ(limiter.large_in_flight(), 2u);  // the refused one holds nothing
    EXPECT_EQ(HandleAdmission(Endpoint::kValidate, "", small, WebhookConfig{}, options).status, 200);
    EXPECT_EQ(HandleAdmission(Endpoint::kMutate, "", small, WebhookConfig{}, options).status, 200);
    // A large body the bounds refuse is refused as such, without waiting for a slot.
    const std::string deep = large.substr(0, large.size() - 2) + std::string(100, '[') + std::string(100, ']') + "}}";
    const HandlerReply refused = HandleAdmission(Endpoint::kValidate, "", deep, WebhookConfig{}, options);
    EXPECT_EQ(refused.status, 400);
    EXPECT_NE(refused.body.find("levels deep"), std::string::npos) << refused.body;
  }
  EXPECT_EQ(limiter.large_in_flight(), 0u);
  EXPECT_EQ(HandleAdmission(Endpoint::kValidate, "", large, WebhookConfig{}, options).status, 200);
  EXPECT_EQ(limiter.large_in_flight(), 0u);
}

// The deep and wide attack bodies at the handler: 400 with the reason, never a crash.
TEST(HandlerTest, AttackBodiesGetA400) {
  const std::string deep = R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"object":)" +
                           std::string(1'000'000, '[') + std::string(1'000'000, ']') + "}}";
  const HandlerReply r = HandleAdmission(Endpoint::kValidate, "application/json", deep, WebhookConfig{});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.outcome, Outcome::kBadRequest);
  EXPECT_NE(r.body.find("more than 64 levels deep"), std::string::npos) << r.body.substr(0, 300);
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
  EXPECT_STREQ(OutcomeName(Outcome::kThrottled), "throttled");
}

}  // namespace
}  // namespace gpusched::webhook
