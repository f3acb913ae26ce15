#pragma once

// Base64 (RFC 4648) as the Kubernetes wire uses it: the *-data fields of a kubeconfig, an AdmissionReview's JSON
// patch, the cluster's CA in an exec plugin's KUBERNETES_EXEC_INFO.

#include <string>
#include <string_view>

#include "gpusched/common/status.h"

namespace gpusched::kube {

// Standard alphabet, with padding.
[[nodiscard]] std::string EncodeBase64(std::string_view bytes);

// Standard or URL-safe alphabet, padding optional, whitespace ignored; InvalidArgument on other characters or data
// after the padding.
[[nodiscard]] common::Result<std::string> DecodeBase64(const std::string& text);

}  // namespace gpusched::kube
