#include "gpusched/common/redact.h"

#include <string>

#include <gtest/gtest.h>

namespace gpusched::common {
namespace {

struct Case {
  const char* name;
  const char* url;
  const char* want;
};

TEST(RedactTest, UrlsLoseTheirCredentialsAndKeepHostAndPath) {
  const Case cases[] = {
      {"userinfo with a password", "https://user:s3cr3t@prom.example:9090/prometheus",
       "https://***@prom.example:9090/prometheus"},
      {"userinfo, user only", "http://alice@influx:8086", "http://***@influx:8086"},
      // A password with an unencoded '@' or '/': the last '@' before the query ends the userinfo.
      {"an '@' in the password", "https://u:p@ss@host/x", "https://***@host/x"},
      {"a '/' in the password", "https://u:pa/ss@host/x", "https://***@host/x"},
      {"InfluxDB 1.x u and p", "http://influx:8086/query?u=admin&p=hunter2&db=gpu",
       "http://influx:8086/query?u=***&p=***&db=gpu"},
      {"token, password, api_key", "https://h/?token=abc&password=def&api_key=ghi&step=15",
       "https://h/?token=***&password=***&api_key=***&step=15"},
      {"names in any case, %-encoded", "https://h/?Access_Token=a&X-API-KEY=b&pass%77ord=c&PWD=d",
       "https://h/?Access_Token=***&X-API-KEY=***&pass%77ord=***&PWD=***"},
      {"a token in the fragment", "https://h/cb#access_token=xyz&state=1", "https://h/cb#access_token=***&state=1"},
      {"both, and an '@' in the query is not userinfo", "https://u:p@h/?email=a@b&p=x",
       "https://***@h/?email=a@b&p=***"},
      {"nothing to hide", "http://prometheus.monitoring:9090/", "http://prometheus.monitoring:9090/"},
      {"a parameter without a value", "https://h/?token&db=x", "https://h/?token&db=x"},
      {"not a URL", "plain text", "plain text"},
      {"no scheme", "reader:pw@prom:9090/?p=x", "***@prom:9090/?p=***"},
      {"an empty secret", "https://h/?p=", "https://h/?p=***"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(RedactUrl(c.url), c.want) << c.name;
  }
}

TEST(RedactTest, EveryUrlInFreeTextIsRedacted) {
  EXPECT_EQ(RedactUrls("metrics source prometheus https://u:pw@p:9090/x is down: HTTP 401 from "
                       "\"HTTPS://v:pw2@q/?token=t\"; see http://ok/"),
            "metrics source prometheus https://***@p:9090/x is down: HTTP 401 from \"HTTPS://***@q/?token=***\"; see "
            "http://ok/");
  EXPECT_EQ(RedactUrls("no URL here: user:pass@host"), "no URL here: user:pass@host");
  EXPECT_EQ(RedactUrls("ends with http://u:p@h"), "ends with http://***@h");
  EXPECT_EQ(RedactUrls("http"), "http");
  EXPECT_EQ(RedactUrls(""), "");
}

}  // namespace
}  // namespace gpusched::common
