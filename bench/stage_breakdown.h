#pragma once
// Where a relay's time and CPU went between two scrapes of its /metrics, per stage.

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace bench {

// A scrape of the relay's /metrics: "name{labels}" -> value, as rendered.
using MetricsScrape = std::map<std::string, double>;

// GET http://`address`/metrics ("host:port") and its samples. Throws BenchError.
MetricsScrape scrape_metrics(const std::string& address);

// Scrapes until every row the relay counts as published also has its stages
// observed (it observes them just after its commit, which a reader of the table may
// see first), for at most 10 s.
MetricsScrape scrape_metrics_settled(const std::string& address);

// A TCP port free on 127.0.0.1 now (bound, then released): where a relay's
// http.listen goes, the bench knowing the address without reading the relay's log.
int free_local_port();

struct StageFigures {
  double mean_ms = 0;
  // From the histogram's bucket counts, interpolated linearly inside the bucket
  // (as Prometheus' histogram_quantile): as fine as the buckets (1-1.5-2-3-5-7 per decade).
  double p99_ms = 0;
  double count = 0;
};

// Between two scrapes of one relay: outbox_relay_stage_seconds (per row published)
// and outbox_relay_stage_cpu_seconds_total over the rows published.
struct StageBreakdown {
  std::vector<std::pair<std::string, StageFigures>> latency;   // queued, claim, publish, confirm, settle
  std::vector<std::pair<std::string, double>> cpu_us_per_msg;  // claim, decode, publish, settle, mark
  double published = 0;
  // Per batch (claims include empty ones): outbox_relay_claim_duration_seconds and
  // outbox_relay_mark_duration_seconds, whose buckets double (a coarser p99).
  StageFigures claim_statement, mark_and_commit;
};
StageBreakdown stage_breakdown(const MetricsScrape& before, const MetricsScrape& after);

// The q-quantile of a histogram from its cumulative bucket counts (upper bound ->
// count, +Inf included as HUGE_VAL); a quantile in the +Inf bucket is the last
// finite bound. 0 without observations. Pure.
double bucket_quantile(const std::map<double, double>& cumulative, double q);

nlohmann::json to_json(const StageBreakdown& b);
// Two lines for the console: per stage mean/p99, and relay CPU per message.
std::string show(const StageBreakdown& b);

}  // namespace bench
