#pragma once

// Credentials out of URLs before they are shown: in /readyz bodies, /metrics labels, log lines and error messages.
// A metrics source may be configured as https://user:pass@prometheus.example/ or with a token in the query
// (InfluxDB 1.x takes u= and p=); the URL itself is still used as given, only what is printed is redacted.
//
//   userinfo  everything between "://" and the last '@' before the query or fragment becomes "***"
//             (https://***@host/path). A '@' in the path (rare in these URLs) redacts too much, never too little.
//   query and fragment parameters whose name, lower-cased and %-decoded, is one of p, u, pass, pwd, key, sig,
//             or contains token, secret, passw, auth, api_key, apikey, api-key, credential, signature, session:
//             the value becomes "***" (?u=***&p=***&db=gpu). Other parameters, the scheme, host, port and path
//             are kept so that operators can still tell which server is meant.

#include <string>
#include <string_view>

namespace gpusched::common {

// `url` with its credentials replaced (above). Without a scheme (a mistyped "user:pw@host:9090") the text is read
// as if it followed "://", so a URL refused for its scheme is printed without its credentials too.
[[nodiscard]] std::string RedactUrl(std::string_view url);

// Every http:// and https:// URL in free text (an error message, a log line) redacted like RedactUrl. A URL ends at
// whitespace, a quote, '<', '>' or '`'.
[[nodiscard]] std::string RedactUrls(std::string_view text);

}  // namespace gpusched::common
