#include "gpusched/adapters/k8s/api_errors.h"

#include <nlohmann/json.hpp>

#include <string>

namespace gpusched::adapters::k8s {
namespace {

const char* ReasonPhrase(long code) {
  switch (code) {
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 415:
      return "Unsupported Media Type";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "";
  }
}

}  // namespace

common::Status StatusFromHttp(std::string_view method, std::string_view path, long http_code, std::string_view body) {
  std::string reason;
  std::string server_message;
  const nlohmann::json parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object() && parsed.value("kind", "") == "Status") {
    if (parsed.contains("message") && parsed["message"].is_string()) {
      server_message = parsed["message"].get<std::string>();
    }
    if (parsed.contains("reason") && parsed["reason"].is_string()) {
      reason = parsed["reason"].get<std::string>();
    }
  } else if (parsed.is_discarded() && !body.empty() && body.size() <= 200) {
    server_message = std::string(body);  // a short plain-text body (proxies, load balancers)
  }
  std::string message = std::string(method) + " " + std::string(path) + ": HTTP " + std::to_string(http_code);
  const char* phrase = ReasonPhrase(http_code);
  if (*phrase != '\0') {
    message += std::string(" ") + phrase;
  }
  if (!server_message.empty()) {
    message += ": " + server_message;
  }
  using common::StatusCode;
  StatusCode code = StatusCode::kInternal;
  if (http_code == 400 || http_code == 422) {
    code = StatusCode::kInvalidArgument;
  } else if (http_code == 401) {
    code = StatusCode::kUnauthenticated;
  } else if (http_code == 403) {
    code = StatusCode::kPermissionDenied;
  } else if (http_code == 404) {
    code = StatusCode::kNotFound;
  } else if (http_code == 409) {
    code = reason == "AlreadyExists" ? StatusCode::kAlreadyExists : StatusCode::kAborted;
  } else if (http_code == 410) {
    code = StatusCode::kFailedPrecondition;
    message += " (gone)";
  } else if (http_code == 429 || (http_code >= 500 && http_code <= 599)) {
    code = StatusCode::kUnavailable;
  }
  return {code, message};
}

common::Status StatusFromTransport(std::string_view method, std::string_view path, bool timed_out,
                                   std::string_view detail) {
  std::string message = std::string(method) + " " + std::string(path) + ": " + std::string(detail);
  if (timed_out) {
    return common::DeadlineExceeded(std::move(message));
  }
  return common::Unavailable(std::move(message));
}

bool IsRetryable(const common::Status& status) {
  return status.code() == common::StatusCode::kUnavailable || status.code() == common::StatusCode::kDeadlineExceeded;
}

std::string DescribeApiFailure(const common::Status& status, std::string_view server) {
  // StatusFromHttp's messages carry ": HTTP <code>"; StatusFromTransport's never do.
  const bool answered = status.message().find(": HTTP ") != std::string::npos;
  if (IsRetryable(status) && !answered) {
    return "cannot reach the API server at " + std::string(server) + ": " + status.message();
  }
  return "the API server at " + std::string(server) + " answered: " + status.message();
}

}  // namespace gpusched::adapters::k8s
