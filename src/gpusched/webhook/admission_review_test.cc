#include "gpusched/webhook/admission_review.h"

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace gpusched::webhook {
namespace {

using nlohmann::json;

// A review as kube-apiserver v1.20 sends it for `kubectl create` of a pod (trimmed: the fields gpusched reads, plus
// some it ignores).
json PodCreateReview() {
  return json::parse(R"json({
    "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
    "request": {
      "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
      "kind": {"group": "", "version": "v1", "kind": "Pod"},
      "resource": {"group": "", "version": "v1", "resource": "pods"},
      "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
      "requestResource": {"group": "", "version": "v1", "resource": "pods"},
      "name": "trainer", "namespace": "team-a", "operation": "CREATE",
      "userInfo": {"username": "alice", "uid": "a1", "groups": ["team-a-devs", "system:authenticated"]},
      "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer", "namespace": "team-a"},
                 "spec": {"containers": [{"name": "main", "image": "cuda"}]}},
      "oldObject": null,
      "dryRun": true,
      "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
    }})json");
}

TEST(AdmissionReviewTest, DecodesEveryFieldTheRulesRead) {
  auto r = DecodeAdmissionReview(PodCreateReview().dump());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->api_version, "admission.k8s.io/v1");
  EXPECT_EQ(r->uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
  EXPECT_EQ(r->kind.kind, "Pod");
  EXPECT_EQ(r->kind.version, "v1");
  EXPECT_EQ(r->resource.resource, "pods");
  EXPECT_EQ(r->resource.group, "");
  EXPECT_EQ(r->sub_resource, "");
  EXPECT_EQ(r->operation, Operation::kCreate);
  EXPECT_EQ(r->user.username, "alice");
  EXPECT_EQ(r->user.groups, (std::vector<std::string>{"team-a-devs", "system:authenticated"}));
  EXPECT_EQ(r->namespace_name, "team-a");
  EXPECT_EQ(r->name, "trainer");
  EXPECT_EQ(r->object["metadata"]["name"], "trainer");
  EXPECT_TRUE(r->old_object.is_null());
  EXPECT_TRUE(r->dry_run);
  EXPECT_TRUE(r->Is("pods"));
  EXPECT_FALSE(r->Is("pods", "binding"));
}

TEST(AdmissionReviewTest, DecodesABindingAndAnUpdate) {
  json review = PodCreateReview();
  review["request"]["subResource"] = "binding";
  review["request"]["kind"] = {{"group", ""}, {"version", "v1"}, {"kind", "Binding"}};
  auto binding = DecodeAdmissionReview(review.dump());
  ASSERT_TRUE(binding.ok()) << binding.status();
  EXPECT_TRUE(binding->Is("pods", "binding"));

  review["request"]["operation"] = "UPDATE";
  review["request"]["subResource"] = "status";
  review["request"]["oldObject"] = review["request"]["object"];
  auto update = DecodeAdmissionReview(review.dump());
  ASSERT_TRUE(update.ok()) << update.status();
  EXPECT_EQ(update->operation, Operation::kUpdate);
  EXPECT_TRUE(update->old_object.is_object());

  review["apiVersion"] = "admission.k8s.io/v1beta1";
  auto beta = DecodeAdmissionReview(review.dump());
  ASSERT_TRUE(beta.ok()) << beta.status();
  EXPECT_EQ(beta->api_version, "admission.k8s.io/v1beta1");
}

TEST(AdmissionReviewTest, RefusesMalformedReviewsNamingTheField) {
  struct Case {
    std::string what;
    std::string body;  // empty: PodCreateReview() changed by `change`
    std::function<void(json&)> change;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"not JSON", "{\"apiVersion\":", nullptr, "not valid JSON"},
      {"empty body", " ", nullptr, "not valid JSON"},
      {"a list", "[1,2]", nullptr, "not a JSON object"},
      {"wrong apiVersion", "", [](json& j) { j["apiVersion"] = "admission.k8s.io/v2"; }, "apiVersion must be"},
      {"no apiVersion", "", [](json& j) { j.erase("apiVersion"); }, "apiVersion must be"},
      {"wrong kind", "", [](json& j) { j["kind"] = "Pod"; }, "kind must be AdmissionReview"},
      {"no request", "", [](json& j) { j.erase("request"); }, "request is missing"},
      {"request is a string", "", [](json& j) { j["request"] = "x"; }, "request is missing or not an object"},
      {"no uid", "", [](json& j) { j["request"].erase("uid"); }, "request.uid is missing"},
      {"empty uid", "", [](json& j) { j["request"]["uid"] = ""; }, "request.uid is missing"},
      {"numeric uid", "", [](json& j) { j["request"]["uid"] = 7; }, "request.uid is not a string"},
      {"huge uid", "", [](json& j) { j["request"]["uid"] = std::string(300, 'u'); }, "too long"},
      {"no kind", "", [](json& j) { j["request"].erase("kind"); }, "request.kind is missing"},
      {"kind without kind", "", [](json& j) { j["request"]["kind"].erase("kind"); }, "request.kind.kind"},
      {"no resource", "", [](json& j) { j["request"].erase("resource"); }, "request.resource is missing"},
      {"resource not a string", "", [](json& j) { j["request"]["resource"]["resource"] = 1; },
       "request.resource.resource is not a string"},
      {"unknown operation", "", [](json& j) { j["request"]["operation"] = "PATCH"; }, "\"PATCH\" is not one of"},
      {"no operation", "", [](json& j) { j["request"].erase("operation"); }, "request.operation is missing"},
      {"no userInfo", "", [](json& j) { j["request"].erase("userInfo"); }, "request.userInfo is missing"},
      {"no username", "", [](json& j) { j["request"]["userInfo"].erase("username"); }, "username is missing"},
      {"groups not a list", "", [](json& j) { j["request"]["userInfo"]["groups"] = "admins"; }, "groups is not a list"},
      {"a numeric group", "", [](json& j) { j["request"]["userInfo"]["groups"] = {1}; }, "non-string entry"},
      {"object is a list", "", [](json& j) { j["request"]["object"] = json::array(); }, "request.object is not"},
      {"oldObject is a string", "", [](json& j) { j["request"]["oldObject"] = "x"; }, "request.oldObject is not"},
      {"dryRun is a string", "", [](json& j) { j["request"]["dryRun"] = "yes"; }, "dryRun is not a boolean"},
      {"subResource is a number", "", [](json& j) { j["request"]["subResource"] = 3; }, "subResource is not a string"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    std::string body = c.body;
    if (c.change) {
      json j = PodCreateReview();
      c.change(j);
      body = j.dump();
    }
    auto r = DecodeAdmissionReview(body);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), common::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status();
  }
}

// The review of PodCreateReview with `object` replaced by raw JSON text (which may be anything).
std::string WithRawObject(const std::string& object, const std::string& old_object = "null") {
  json review = PodCreateReview();
  review["request"]["object"] = "@OBJECT@";
  review["request"]["oldObject"] = "@OLD@";
  std::string text = review.dump();
  text.replace(text.find("\"@OBJECT@\""), 10, object);
  text.replace(text.find("\"@OLD@\""), 7, old_object);
  return text;
}

// What a tenant pod can POST to the webhook's port: each is refused before any deep or huge value is built, with a
// clear reason, and nothing crashes.
TEST(AdmissionReviewTest, RefusesBodiesTooDeepOrTooLargeBeforeBuildingThem) {
  constexpr size_t kMillion = 1'000'000;
  // A million nested arrays (2 MB): the recursive copy of such a value overflowed the stack.
  const std::string deep = WithRawObject("{\"a\":" + std::string(kMillion, '[') + std::string(kMillion, ']') + "}");
  auto r = DecodeAdmissionReview(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("more than 64 levels deep"), std::string::npos) << r.status();
  // The same, never closed (invalid JSON: the parser would build it before failing).
  r = DecodeAdmissionReview(WithRawObject(std::string(kMillion, '{') + std::string(kMillion, '"')));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("levels deep"), std::string::npos) << r.status();
  // 64 levels are fine; 65 are not (the review itself takes 2: the body and request).
  EXPECT_TRUE(DecodeAdmissionReview(WithRawObject("{\"a\":" + std::string(61, '[') + std::string(61, ']') + "}")).ok());
  EXPECT_FALSE(
      DecodeAdmissionReview(WithRawObject("{\"a\":" + std::string(62, '[') + std::string(62, ']') + "}")).ok());
  // Brackets inside strings (escaped quotes too) are text, not nesting.
  EXPECT_TRUE(
      DecodeAdmissionReview(WithRawObject("{\"a\":\"\\\"" + std::string(kMillion, '[') + "\\\\\",\"b\":1}")).ok());

  // 1.4 million empty objects in 4 MiB: 30 times the body in memory once parsed.
  std::string wide = "{\"items\":[";
  for (size_t i = 0; i < 1'400'000; ++i) {
    wide += i == 0 ? "{}" : ",{}";
  }
  wide += "]}";
  r = DecodeAdmissionReview(WithRawObject(wide));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("more than 250000 JSON values"), std::string::npos) << r.status();

  // An object larger than etcd stores (1.5 MiB), as one long string; just under it decodes.
  const auto annotated = [](size_t bytes) {
    return json{{"metadata", {{"name", "trainer"}, {"annotations", {{"big", std::string(bytes, 'x')}}}}}}.dump();
  };
  r = DecodeAdmissionReview(WithRawObject(annotated(kMaxObjectBytes)));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("request.object is larger than 1572864 bytes"), std::string::npos) << r.status();
  r = DecodeAdmissionReview(WithRawObject("{}", annotated(kMaxObjectBytes)));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("request.oldObject is larger"), std::string::npos) << r.status();
  r = DecodeAdmissionReview(WithRawObject(annotated(kMaxObjectBytes - 200), annotated(kMaxObjectBytes - 200)));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->object["metadata"]["annotations"]["big"].get_ref<const std::string&>().size(), kMaxObjectBytes - 200);
}

// The value bound counts '{', '[' and ',' outside strings: at the bound a review decodes, one more is refused.
TEST(AdmissionReviewTest, TheValueBoundIsExact) {
  const std::string shell = WithRawObject("{\"a\":[@]}");
  size_t base = 0;
  bool in_string = false;
  for (size_t i = 0; i < shell.size(); ++i) {
    if (shell[i] == '"' && shell[i - 1] != '\\') {
      in_string = !in_string;
    } else if (!in_string && (shell[i] == '{' || shell[i] == '[' || shell[i] == ',')) {
      ++base;
    }
  }
  const auto with_members = [&](size_t n) {  // n zeros in the array: n - 1 commas
    std::string members = "0";
    for (size_t i = 1; i < n; ++i) {
      members += ",0";
    }
    std::string text = shell;
    text.replace(text.find('@'), 1, members);
    return text;
  };
  auto at = DecodeAdmissionReview(with_members(kMaxJsonValues - base + 1));
  EXPECT_TRUE(at.ok()) << at.status();
  auto over = DecodeAdmissionReview(with_members(kMaxJsonValues - base + 2));
  EXPECT_FALSE(over.ok());
}

TEST(AdmissionReviewTest, EncodesAllowedDeniedAndPatchedAnswers) {
  auto request = DecodeAdmissionReview(PodCreateReview().dump());
  ASSERT_TRUE(request.ok());

  const json allowed = json::parse(EncodeAdmissionReview(*request, AdmissionResponse::Allow()));
  EXPECT_EQ(allowed, json::parse(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",
      "response":{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","allowed":true}})"));

  const json denied = json::parse(EncodeAdmissionReview(*request, AdmissionResponse::Deny(403, "Forbidden", "no")));
  EXPECT_EQ(denied["response"], json::parse(R"({"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","allowed":false,
      "status":{"status":"Failure","code":403,"reason":"Forbidden","message":"no"}})"));

  AdmissionResponse patched;
  patched.patch = json::parse(R"([{"op":"add","path":"/spec/schedulerName","value":"gpusched"}])");
  patched.warnings = {"gpusched: changed"};
  const json p = json::parse(EncodeAdmissionReview(*request, patched));
  EXPECT_EQ(p["response"]["patchType"], "JSONPatch");
  EXPECT_EQ(p["response"]["patch"], EncodeBase64(patched.patch.dump()));
  EXPECT_EQ(p["response"]["warnings"], json::array({"gpusched: changed"}));
  EXPECT_FALSE(p["response"].contains("status"));

  request->api_version = "admission.k8s.io/v1beta1";
  EXPECT_EQ(json::parse(EncodeAdmissionReview(*request, AdmissionResponse::Allow()))["apiVersion"],
            "admission.k8s.io/v1beta1");
}

TEST(AdmissionReviewTest, InvalidUtf8InAMessageDoesNotBreakTheAnswer) {
  auto request = DecodeAdmissionReview(PodCreateReview().dump());
  ASSERT_TRUE(request.ok());
  const std::string text =
      EncodeAdmissionReview(*request, AdmissionResponse::Deny(422, "Invalid", std::string("bad \xff\xfe name")));
  const json j = json::parse(text);
  EXPECT_FALSE(j["response"]["allowed"].get<bool>());
}

TEST(AdmissionReviewTest, Base64AsRfc4648) {
  const std::pair<std::string, std::string> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"},
                                                         {"\xff\xfe", "//4="}};
  for (const auto& [in, want] : vectors) {
    EXPECT_EQ(EncodeBase64(in), want) << in;
  }
}

}  // namespace
}  // namespace gpusched::webhook
