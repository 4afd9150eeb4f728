#pragma once
// BenchOptions: what one outbox-bench run measures, read from the command line.

#include <stdexcept>
#include <string>
#include <vector>

namespace bench {

struct BenchOptions {
  // --smoke: every phase, tiny sizes, well under a minute; checks that the program
  // and the relay work, not how fast they are. With --phases soak: 30 s per mode, a
  // sample every 5 s, 300 msg/s.
  bool smoke = false;
  // --json FILE: the summary as JSON (keys listed in docs/PERFORMANCE.md).
  std::string json_path;
  // --relay-bin PATH: the outbox-relay binary to run (default: the one built with
  // this bench).
  std::string relay_bin;
  // --message-bytes: payload size of every message (ceiling, drain, latency).
  int message_bytes = 300;
  // --queue-type classic|quorum: the bench queue's type (quorum on a RabbitMQ cluster,
  // deploy/local/cluster.sh: the ceiling and the drains then measure a replicated queue).
  std::string queue_type = "classic";
  // --backlog: rows drained per drain measurement; also the messages the broker
  // ceiling publishes and the rows the PG ceiling claims, so that all three do the
  // same work (a queue growing to the same depth).
  long backlog = 100000;
  // --batch-size: the relay's batch_size (and the PG ceiling's claim size).
  int batch_size = 500;
  // --repeats: rounds of {broker ceiling, PG ceiling, drain 1, drain 2}; medians
  // and per-round ratios are reported, which keeps the ratios honest on a noisy box.
  int repeats = 3;
  // --producer-seconds: length of each enqueue-rate measurement.
  double producer_seconds = 3;
  // --rates: steady producer rates (messages/s) of the latency phase.
  std::vector<long> rates = {1000, 5000};
  // --latency-seconds: producing time at each rate.
  double latency_seconds = 20;
  // --latency-per-transaction: messages each producer transaction commits in the
  // latency phase; 0: ceil(rate / 1000), so at most 1 000 commits/s.
  int latency_per_transaction = 0;
  // --latency-relays: relay processes on the run's schema in the latency phase (a
  // deployment scaled out at a low rate); the first one's /metrics gives the stages.
  int latency_relays = 1;
  // --latency-floor on|off: after the relay, the same rates through the bench's
  // simplest correct pipeline (floor_pipeline.h), and the relay's latency as ratios
  // to it.
  bool latency_floor = true;
  // --idle-seconds: how long the idle relay's queries are counted.
  double idle_seconds = 20;
  // --sweep-batch-sizes, --sweep-message-bytes, --sweep-backlogs: extra drain
  // measurements (one relay) at each value, for the cost curves.
  std::vector<long> sweep_batch_sizes, sweep_message_bytes, sweep_backlogs;
  // --history-rows: published rows written into the table before the backlog sweep
  // (the claim must not slow down with published history).
  long history_rows = 0;
  // --relay-setting KEY=VALUE (repeatable): extra keys of the relay: section of the
  // relays' configuration, e.g. pipeline_depth=1, to measure a lever.
  std::vector<std::string> relay_settings;
  // --scale-relays: relay counts of the scale phase, each run in both ordering
  // modes (unordered, per_key) over a backlog with --scale-keys ordering keys.
  std::vector<long> scale_relays = {1, 2, 4};
  long scale_keys = 1000;
  // --broker-cpus: the broker on these CPUs only, PostgreSQL, the bench and the relays
  // on the others, for the whole run (BrokerCpuIsolation): as on separate hosts.
  // Empty: nobody is pinned.
  std::vector<long> broker_cpus;
  // The soak phase (only when --phases names it: it takes hours by default):
  // producers at --soak-rate messages/s for --soak-minutes per mode of --soak-modes
  // (mark with retention, delete, ordered), a row of figures every
  // --soak-sample-seconds, written to --soak-csv (default: beside --json).
  double soak_minutes = 60;
  long soak_rate = 2000;
  std::vector<std::string> soak_modes = {"mark", "delete", "ordered"};
  double soak_sample_seconds = 60;
  // --soak-retention-minutes: retention.keep of the mark and ordered modes; short, so
  // that retention deletes rows (and autovacuum follows) many times within a run.
  long soak_retention_minutes = 1;
  std::string soak_csv;
  // --soak-disk-dir: where the soak times 4 KiB flushes beside the run (DiskProbe): a
  // directory on the servers' disk. Empty: $OUTBOX_LOCAL_DIR, else off; "off": none.
  std::string soak_disk_dir;
  // The scheduled phase: at each of --scheduled-rates, producers commit messages due
  // 2 s later for --scheduled-seconds, then unscheduled ones (the floor).
  std::vector<long> scheduled_rates = {1000};
  double scheduled_seconds = 30;
  // --phases: which parts run (rounds, enqueue, latency, sweeps, scale, wire,
  // fanout, scheduled, soak); all but soak by default.
  // Keys of the phases left out are missing from the JSON.
  std::vector<std::string> phases = {"rounds", "enqueue", "latency", "sweeps", "scale", "wire", "fanout", "scheduled"};
  bool runs(const std::string& phase) const;
  // The command line, for the report.
  std::string command;
};

class BenchUsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses argv. Throws BenchUsageError naming the option and the value at fault.
BenchOptions parse_bench_options(int argc, char** argv);

// The --help text.
std::string bench_usage();

}  // namespace bench
