#pragma once
// Test support: HTTP GETs with Boost.Beast and a strict reader of the Prometheus
// text exposition format, for tests of the relay's /metrics, /healthz, /readyz.

#include <chrono>
#include <map>
#include <string>

namespace testenv {

struct HttpReply {
  int status = 0;
  std::string content_type;
  std::string body;
};

// One request to "host:port" (Beast client). Throws std::runtime_error when the
// connection fails.
HttpReply http_request(const std::string& address, const std::string& target, const std::string& method = "GET");

// Parses exposition text into "name{labels}" -> value (labels as rendered).
// Throws std::runtime_error naming the first malformed line: a sample without a
// preceding # TYPE for its family, a bad name, label set or number.
std::map<std::string, double> parse_prometheus(const std::string& text);

// Waits until `log_text()` contains "serving ... on http://ADDR" and returns ADDR.
template <class LogText>
std::string wait_for_http_address(LogText log_text, std::chrono::seconds limit);

// Runs the text through an independent parser (python3-prometheus-client's
// text_string_to_metric_families); returns "" when it accepts it, else its error.
std::string python_prometheus_check(const std::string& text);

}  // namespace testenv

#include <stdexcept>
#include <thread>

template <class LogText>
std::string testenv::wait_for_http_address(LogText log_text, std::chrono::seconds limit) {
  const std::string marker = "/readyz on http://";
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    auto log = log_text();
    auto at = log.find(marker);
    if (at != std::string::npos) {
      auto start = at + marker.size();
      auto end = log.find_first_of(" \n\"", start);
      return log.substr(start, end - start);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error("the relay did not report its HTTP address");
}
