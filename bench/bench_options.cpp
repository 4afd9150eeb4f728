#include "bench_options.h"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

namespace bench {
namespace {

long parse_long(const std::string& option, const std::string& text, long min, long max) {
  long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size())
    throw BenchUsageError(option + ": expected an integer, got '" + text + "'");
  if (value < min || value > max)
    throw BenchUsageError(option + ": must be between " + std::to_string(min) + " and " + std::to_string(max) +
                          ", got " + text);
  return value;
}

double parse_seconds(const std::string& option, const std::string& text, const char* unit = "seconds") {
  std::istringstream in(text);
  double value = 0;
  if (!(in >> value) || !in.eof() || !std::isfinite(value))
    throw BenchUsageError(option + ": expected a number of " + unit + ", got '" + text + "'");
  if (value <= 0 || value > 86400) throw BenchUsageError(option + ": must be above 0 and at most 86400, got " + text);
  return value;
}

std::vector<long> parse_list(const std::string& option, const std::string& text, long min, long max) {
  std::vector<long> values;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    values.push_back(parse_long(option, text.substr(start, comma - start), min, max));
    start = comma + 1;
  }
  return values;
}

std::vector<std::string> parse_phases(const std::string& option, const std::string& text) {
  static const std::vector<std::string> kKnown = {"rounds", "enqueue", "latency",   "sweeps", "scale",
                                                  "wire",   "fanout",  "scheduled", "soak"};
  std::vector<std::string> phases;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    auto p = text.substr(start, comma - start);
    if (std::find(kKnown.begin(), kKnown.end(), p) == kKnown.end())
      throw BenchUsageError(option + ": unknown phase '" + p +
                            "' (rounds, enqueue, latency, sweeps, scale, wire, fanout, scheduled, soak)");
    phases.push_back(p);
    start = comma + 1;
  }
  return phases;
}

std::string parse_directory_or_off(const std::string& option, const std::string& text) {
  struct stat st {};
  if (text != "off" && (text.empty() || ::stat(text.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)))
    throw BenchUsageError(option + ": '" + text + "' is not a directory (name one on the servers' disk, or 'off')");
  return text;
}

std::vector<std::string> parse_soak_modes(const std::string& option, const std::string& text) {
  std::vector<std::string> modes;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    auto m = text.substr(start, comma - start);
    if (m != "mark" && m != "delete" && m != "ordered")
      throw BenchUsageError(option + ": unknown mode '" + m + "' (mark, delete, ordered)");
    modes.push_back(m);
    start = comma + 1;
  }
  return modes;
}

void apply_smoke(BenchOptions& o) {
  o.backlog = 5000;
  o.repeats = 1;
  o.producer_seconds = 0.5;
  o.rates = {200};
  o.latency_seconds = 3;
  o.idle_seconds = 3;
  o.scale_relays = {1, 2};
  o.scale_keys = 100;
  // Only with --phases soak: the settings of bench_soak_smoke_rmqtest.
  o.soak_minutes = 0.5;
  o.soak_sample_seconds = 5;
  o.soak_rate = 300;
  o.scheduled_rates = {200};
  o.scheduled_seconds = 2;
}

}  // namespace

std::string bench_usage() {
  return "usage: outbox-bench [options]\n"
         "Measures the broker ceiling, the PostgreSQL claim ceiling, producer enqueue rates,\n"
         "relay drain rates (1 and 2 processes), latency at steady rates, relay RSS, CPU and\n"
         "idle queries, against OUTBOX_PG_DSN and OUTBOX_AMQP_URI (deploy/local/servers.sh).\n"
         "  --smoke                   tiny sizes, under a minute (CI); with --phases soak, 30 s per mode\n"
         "  --json FILE               write the summary as JSON\n"
         "  --message-bytes N         payload size (default 300)\n"
         "  --queue-type classic|quorum  the bench queue's type (default classic)\n"
         "  --backlog N               rows per drain, messages per broker ceiling (default 100000)\n"
         "  --batch-size N            relay batch_size (default 500)\n"
         "  --repeats N               rounds of ceiling/drain measurements (default 3)\n"
         "  --producer-seconds S      each enqueue-rate measurement (default 3)\n"
         "  --rates R1,R2             latency phase rates, messages/s (default 1000,5000)\n"
         "  --latency-seconds S       producing time per rate (default 20)\n"
         "  --latency-per-transaction N  messages per producer transaction in the latency phase\n"
         "                            (default: ceil(rate / 1000), at most 1 000 commits/s)\n"
         "  --latency-relays N        relay processes in the latency phase (default 1)\n"
         "  --latency-floor on|off    the same rates through the simplest correct pipeline, and the\n"
         "                            relay's latency as ratios to it (default on)\n"
         "  --idle-seconds S          idle query counting time (default 20)\n"
         "  --sweep-batch-sizes LIST  extra one-relay drains at these batch sizes\n"
         "  --sweep-message-bytes LIST  extra ceiling + drain at these payload sizes\n"
         "  --sweep-backlogs LIST     extra one-relay drains of these backlogs (e.g. 10000,1000000)\n"
         "  --history-rows N          published rows in the table before the backlog sweep\n"
         "  --relay-setting K=V       extra relay: key for the relays (repeatable; not ordering);\n"
         "                            postgres.K=V / amqp.K=V for those sections\n"
         "  --scale-relays LIST       relay counts of the scale phase, both ordering modes (default 1,2,4)\n"
         "  --scale-keys N            ordering keys in the scale phase's backlog (default 1000)\n"
         "  --scheduled-rates LIST    scheduled phase: rates of messages due 2 s after their commit (default 1000)\n"
         "  --scheduled-seconds S     scheduled phase: producing time per rate and kind (default 30)\n"
         "  --phases LIST             rounds,enqueue,latency,sweeps,scale,wire,fanout,scheduled,soak\n"
         "                            (default: all but soak)\n"
         "  --soak-minutes M          soak: minutes per mode (default 60; decimals allowed)\n"
         "  --soak-rate R             soak: steady producer rate, messages/s (default 2000)\n"
         "  --soak-modes LIST         soak: mark,delete,ordered (default: all three)\n"
         "  --soak-sample-seconds S   soak: one row of figures every S seconds (default 60)\n"
         "  --soak-retention-minutes M  soak: retention.keep of the mark and ordered modes (default 1)\n"
         "  --soak-csv FILE           soak: the rows (default: beside --json, else ./outbox-bench-soak.csv)\n"
         "  --soak-disk-dir DIR|off   soak: time a 4 KiB flush every 100 ms in DIR, on the servers' disk\n"
         "                            (default: $OUTBOX_LOCAL_DIR, else off)\n"
         "  --relay-bin PATH          outbox-relay binary to run\n"
         "  --broker-cpus LIST        the broker on these CPUs, PostgreSQL, the bench and the relays on\n"
         "                            the others, as on separate hosts (needs root; restored at exit)\n";
}

bool BenchOptions::runs(const std::string& phase) const {
  return std::find(phases.begin(), phases.end(), phase) != phases.end();
}

BenchOptions parse_bench_options(int argc, char** argv) {
  BenchOptions o;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const auto& a : args) o.command += (o.command.empty() ? "" : " ") + a;
  o.command = "outbox-bench" + (o.command.empty() ? "" : " " + o.command);
  // --smoke first, so explicit options given with it still win.
  for (const auto& a : args)
    if (a == "--smoke") {
      o.smoke = true;
      apply_smoke(o);
    }
  constexpr long kMaxRows = 100'000'000;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--smoke") continue;
    if (a == "--help" || a == "-h") throw BenchUsageError("");
    if (i + 1 >= args.size()) throw BenchUsageError(a + ": unknown option or missing value");
    const std::string& v = args[++i];
    if (a == "--json") o.json_path = v;
    else if (a == "--relay-bin") o.relay_bin = v;
    else if (a == "--queue-type") {
      if (v != "classic" && v != "quorum") throw BenchUsageError(a + ": must be classic or quorum, got '" + v + "'");
      o.queue_type = v;
    } else if (a == "--message-bytes") o.message_bytes = static_cast<int>(parse_long(a, v, 1, 1024 * 1024));
    else if (a == "--backlog") o.backlog = parse_long(a, v, 1, kMaxRows);
    else if (a == "--batch-size") o.batch_size = static_cast<int>(parse_long(a, v, 1, 100000));
    else if (a == "--repeats") o.repeats = static_cast<int>(parse_long(a, v, 1, 100));
    else if (a == "--producer-seconds") o.producer_seconds = parse_seconds(a, v);
    else if (a == "--rates") o.rates = parse_list(a, v, 1, 1000000);
    else if (a == "--latency-seconds") o.latency_seconds = parse_seconds(a, v);
    else if (a == "--latency-per-transaction") o.latency_per_transaction = static_cast<int>(parse_long(a, v, 1, 1000));
    else if (a == "--latency-relays") o.latency_relays = static_cast<int>(parse_long(a, v, 1, 16));
    else if (a == "--latency-floor") {
      if (v != "on" && v != "off") throw BenchUsageError(a + ": must be on or off, got '" + v + "'");
      o.latency_floor = v == "on";
    } else if (a == "--idle-seconds") o.idle_seconds = parse_seconds(a, v);
    else if (a == "--sweep-batch-sizes") o.sweep_batch_sizes = parse_list(a, v, 1, 100000);
    else if (a == "--sweep-message-bytes") o.sweep_message_bytes = parse_list(a, v, 1, 1024 * 1024);
    else if (a == "--sweep-backlogs") o.sweep_backlogs = parse_list(a, v, 1, kMaxRows);
    else if (a == "--history-rows") o.history_rows = parse_long(a, v, 0, kMaxRows);
    else if (a == "--phases") o.phases = parse_phases(a, v);
    else if (a == "--broker-cpus") o.broker_cpus = parse_list(a, v, 0, 1023);
    else if (a == "--scale-relays") o.scale_relays = parse_list(a, v, 1, 16);
    else if (a == "--scale-keys") o.scale_keys = parse_long(a, v, 1, kMaxRows);
    else if (a == "--soak-minutes") o.soak_minutes = parse_seconds(a, v, "minutes");
    else if (a == "--soak-rate") o.soak_rate = parse_long(a, v, 1, 1000000);
    else if (a == "--soak-modes") o.soak_modes = parse_soak_modes(a, v);
    else if (a == "--soak-sample-seconds") o.soak_sample_seconds = parse_seconds(a, v);
    else if (a == "--soak-retention-minutes") o.soak_retention_minutes = parse_long(a, v, 1, 1440);
    else if (a == "--soak-csv") o.soak_csv = v;
    else if (a == "--soak-disk-dir") o.soak_disk_dir = parse_directory_or_off(a, v);
    else if (a == "--scheduled-rates") o.scheduled_rates = parse_list(a, v, 1, 100000);
    else if (a == "--scheduled-seconds") o.scheduled_seconds = parse_seconds(a, v);
    else if (a == "--relay-setting") {
      auto eq = v.find('=');
      const auto dot = v.find('.');
      const bool bad_section = dot != std::string::npos && dot < eq && v.compare(0, dot, "postgres") != 0 &&
                               v.compare(0, dot, "amqp") != 0 && v.compare(0, dot, "relay") != 0;
      if (eq == std::string::npos || eq == 0 || bad_section || v.find_first_of("\n:#") != std::string::npos)
        throw BenchUsageError(a + ": expected [postgres.|amqp.]KEY=VALUE, got '" + v + "'");
      o.relay_settings.push_back(v);
    } else {
      throw BenchUsageError(a + ": unknown option");
    }
  }
  for (const auto& kv : o.relay_settings)
    if ((kv.rfind("ordering=", 0) == 0 || kv.rfind("relay.ordering=", 0) == 0) && o.runs("scale"))
      throw BenchUsageError("--relay-setting: '" + kv +
                            "': the scale phase sets ordering itself; leave scale out of --phases");
  for (const auto& kv : o.relay_settings)
    for (const char* key : {"ordering=", "relay.ordering=", "on_publish=", "relay.on_publish="})
      if (kv.rfind(key, 0) == 0 && o.runs("soak"))
        throw BenchUsageError("--relay-setting: '" + kv +
                              "': the soak phase sets ordering and on_publish itself; leave soak out of --phases");
  if (o.runs("soak") && o.soak_sample_seconds > o.soak_minutes * 60)
    throw BenchUsageError("--soak-sample-seconds: " + std::to_string(o.soak_sample_seconds) +
                          " is longer than a soak mode (--soak-minutes " + std::to_string(o.soak_minutes) + ")");
  return o;
}

}  // namespace bench
