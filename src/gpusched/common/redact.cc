#include "gpusched/common/redact.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace gpusched::common {
namespace {

constexpr std::string_view kMask = "***";

char Lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

int HexValue(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  c = Lower(c);
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

// The parameter name as a server reads it: %XX decoded, '+' as a space, lower-cased.
std::string NormalName(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '%' && i + 2 < raw.size()) {
      const int hi = HexValue(raw[i + 1]);
      const int lo = HexValue(raw[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(Lower(static_cast<char>(hi * 16 + lo)));
        i += 2;
        continue;
      }
    }
    out.push_back(raw[i] == '+' ? ' ' : Lower(raw[i]));
  }
  return out;
}

bool Secret(std::string_view raw_name) {
  const std::string name = NormalName(raw_name);
  constexpr std::array<std::string_view, 6> kExact = {"p", "u", "pass", "pwd", "key", "sig"};
  constexpr std::array<std::string_view, 10> kPart = {"token",  "secret",  "passw",      "auth",      "api_key",
                                                      "apikey", "api-key", "credential", "signature", "session"};
  if (std::find(kExact.begin(), kExact.end(), name) != kExact.end()) {
    return true;
  }
  return std::any_of(kPart.begin(), kPart.end(), [&](std::string_view p) { return name.find(p) != std::string::npos; });
}

// name=value&name=value with the secret values masked.
void AppendParams(std::string_view params, std::string& out) {
  while (true) {
    const size_t amp = params.find('&');
    const std::string_view param = params.substr(0, amp);
    const size_t eq = param.find('=');
    if (eq != std::string_view::npos && Secret(param.substr(0, eq))) {
      out.append(param.substr(0, eq + 1));
      out.append(kMask);
    } else {
      out.append(param);
    }
    if (amp == std::string_view::npos) {
      return;
    }
    out.push_back('&');
    params.remove_prefix(amp + 1);
  }
}

}  // namespace

std::string RedactUrl(std::string_view url) {
  // Without a scheme (a URL mistyped as host:port/...), what follows is read as if it came after "://".
  const size_t scheme_end = url.find("://");
  const size_t authority = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  std::string out(url.substr(0, authority));
  std::string_view rest = url.substr(authority);
  const size_t query = rest.find_first_of("?#");
  const size_t at = rest.substr(0, query).rfind('@');
  if (at != std::string_view::npos) {
    out.append(kMask);
    rest.remove_prefix(at);  // keeps the '@'
  }
  const size_t q = rest.find_first_of("?#");
  out.append(rest.substr(0, q));
  if (q == std::string_view::npos) {
    return out;
  }
  rest.remove_prefix(q);
  // ?query then #fragment, each a list of parameters (a fragment may carry access_token=...).
  while (!rest.empty()) {
    out.push_back(rest[0]);
    rest.remove_prefix(1);
    const size_t next = out.back() == '?' ? rest.find('#') : std::string_view::npos;
    AppendParams(rest.substr(0, next), out);
    if (next == std::string_view::npos) {
      break;
    }
    rest.remove_prefix(next);
  }
  return out;
}

std::string RedactUrls(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    // The next "http://" or "https://", in any case.
    size_t start = std::string_view::npos;
    for (size_t j = i; j + 7 <= text.size(); ++j) {
      if (Lower(text[j]) != 'h') {
        continue;
      }
      std::string head;
      for (size_t k = j; k < std::min(text.size(), j + 8); ++k) {
        head.push_back(Lower(text[k]));
      }
      if (head.starts_with("http://") || head.starts_with("https://")) {
        start = j;
        break;
      }
    }
    if (start == std::string_view::npos) {
      out.append(text.substr(i));
      break;
    }
    out.append(text.substr(i, start - i));
    size_t end = start;
    while (end < text.size() && std::isspace(static_cast<unsigned char>(text[end])) == 0 &&
           std::string_view("\"'<>`").find(text[end]) == std::string_view::npos) {
      ++end;
    }
    out.append(RedactUrl(text.substr(start, end - start)));
    i = end;
  }
  return out;
}

}  // namespace gpusched::common
