#include "stage_breakdown.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cmath>
#include <sstream>
#include <thread>

#include "amqp_bench_client.h"
#include "metrics/batch_timeline.h"
#include "metrics/stage_cpu.h"
#include "number_text.h"

namespace bench {
namespace {

namespace http = boost::beast::http;

std::string http_get(const std::string& address, const std::string& target) {
  const auto colon = address.rfind(':');
  boost::asio::io_context io;
  boost::asio::ip::tcp::resolver resolver(io);
  boost::beast::tcp_stream stream(io);
  stream.expires_after(std::chrono::seconds(10));
  stream.connect(resolver.resolve(address.substr(0, colon), address.substr(colon + 1)));
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, address);
  http::write(stream, req);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(stream, buffer, res);
  if (res.result_int() != 200)
    throw BenchError("GET http://" + address + target + ": status " + std::to_string(res.result_int()));
  return res.body();
}

double at(const MetricsScrape& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? 0 : it->second;
}

std::string stage_label(const std::string& stage) { return "stage=\"" + stage + "\""; }

// One histogram series (`labels` as rendered, without braces; "" for none) between
// the scrapes.
StageFigures histogram_figures(const MetricsScrape& before, const MetricsScrape& after, const std::string& family,
                               const std::string& labels) {
  const std::string braced = labels.empty() ? "" : "{" + labels + "}";
  auto delta = [&](const std::string& key) { return at(after, key) - at(before, key); };
  StageFigures f;
  f.count = delta(family + "_count" + braced);
  if (f.count <= 0) return f;
  f.mean_ms = delta(family + "_sum" + braced) / f.count * 1e3;
  const std::string prefix = family + "_bucket{" + (labels.empty() ? "" : labels + ",") + "le=\"";
  std::map<double, double> cumulative;
  for (auto it = after.lower_bound(prefix); it != after.end() && it->first.rfind(prefix, 0) == 0; ++it) {
    const std::string le = it->first.substr(prefix.size(), it->first.size() - prefix.size() - 2);
    cumulative[le == "+Inf" ? HUGE_VAL : std::stod(le)] = it->second - at(before, it->first);
  }
  f.p99_ms = bucket_quantile(cumulative, 0.99) * 1e3;
  return f;
}

}  // namespace

MetricsScrape scrape_metrics(const std::string& address) {
  std::string body;
  try {
    body = http_get(address, "/metrics");
  } catch (const boost::system::system_error& e) {
    throw BenchError("cannot scrape the relay's /metrics at " + address + ": " + e.what());
  }
  MetricsScrape m;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.rfind(' ');
    if (space == std::string::npos) throw BenchError("relay /metrics: not a sample: " + line);
    const std::string value = line.substr(space + 1);
    m[line.substr(0, space)] = value == "+Inf" ? HUGE_VAL : std::stod(value);
  }
  return m;
}

MetricsScrape scrape_metrics_settled(const std::string& address) {
  const std::string settled = "outbox_relay_stage_seconds_count{" + stage_label("settle") + "}";
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    auto m = scrape_metrics(address);
    if (at(m, settled) >= at(m, "outbox_relay_published_total") || std::chrono::steady_clock::now() > until) return m;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int free_local_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  if (fd >= 0) ::close(fd);
  if (!ok) throw BenchError("cannot find a free TCP port on 127.0.0.1 for the relay's /metrics");
  return ntohs(addr.sin_port);
}

double bucket_quantile(const std::map<double, double>& cumulative, double q) {
  if (cumulative.empty() || cumulative.rbegin()->second <= 0) return 0;
  const double rank = q * cumulative.rbegin()->second;
  double lower = 0, below = 0;
  for (const auto& [bound, count] : cumulative) {
    if (count >= rank) {
      if (std::isinf(bound)) return lower;  // past the last finite bound
      return count == below ? bound : lower + (bound - lower) * (rank - below) / (count - below);
    }
    lower = bound;
    below = count;
  }
  return lower;
}

StageBreakdown stage_breakdown(const MetricsScrape& before, const MetricsScrape& after) {
  StageBreakdown b;
  b.published = at(after, "outbox_relay_published_total") - at(before, "outbox_relay_published_total");
  for (std::size_t i = 0; i < relay::kLatencyStages; ++i) {
    const std::string stage = relay::latency_stage_name(static_cast<relay::LatencyStage>(i));
    b.latency.emplace_back(stage, histogram_figures(before, after, "outbox_relay_stage_seconds", stage_label(stage)));
  }
  b.claim_statement = histogram_figures(before, after, "outbox_relay_claim_duration_seconds", "");
  b.mark_and_commit = histogram_figures(before, after, "outbox_relay_mark_duration_seconds", "");
  for (std::size_t i = 0; i < relay::kCpuStages; ++i) {
    const std::string stage = relay::cpu_stage_name(static_cast<relay::CpuStage>(i));
    const std::string key = "outbox_relay_stage_cpu_seconds_total{" + stage_label(stage) + "}";
    const double seconds = at(after, key) - at(before, key);
    b.cpu_us_per_msg.emplace_back(stage, b.published > 0 ? seconds / b.published * 1e6 : 0);
  }
  return b;
}

nlohmann::json to_json(const StageBreakdown& b) {
  nlohmann::json latency = nlohmann::json::object(), cpu = nlohmann::json::object();
  for (const auto& [stage, f] : b.latency)
    latency[stage] = {{"mean_ms", f.mean_ms}, {"p99_ms", f.p99_ms}, {"count", f.count}};
  double total = 0;
  for (const auto& [stage, us] : b.cpu_us_per_msg) {
    cpu[stage] = us;
    total += us;
  }
  cpu["total"] = total;
  auto batch = [](const StageFigures& f) {
    return nlohmann::json{{"mean_ms", f.mean_ms}, {"p99_ms", f.p99_ms}, {"count", f.count}};
  };
  return {{"published", b.published},
          {"stages_ms", latency},
          {"relay_cpu_us_per_msg", cpu},
          {"per_batch_ms", {{"claim", batch(b.claim_statement)}, {"mark_and_commit", batch(b.mark_and_commit)}}}};
}

std::string show(const StageBreakdown& b) {
  std::string latency = "  stages (relay histograms; p99 at bucket resolution):";
  for (const auto& [stage, f] : b.latency) latency += " " + stage + " " + fmt(f.mean_ms, 2) + "/" + fmt(f.p99_ms, 2);
  std::string cpu = "  relay loop CPU us/msg:";
  double total = 0;
  for (const auto& [stage, us] : b.cpu_us_per_msg) {
    cpu += " " + stage + " " + fmt(us, 2);
    total += us;
  }
  auto batch = [](const StageFigures& f) { return fmt(f.mean_ms, 2) + "/" + fmt(f.p99_ms, 2); };
  return latency + " ms (mean/p99); per batch: " + fmt(b.claim_statement.count) + " claims " +
         batch(b.claim_statement) + ", " + fmt(b.mark_and_commit.count) + " mark+commit " + batch(b.mark_and_commit) +
         " ms\n" + cpu + " (total " + fmt(total, 2) + ")\n";
}

}  // namespace bench
