#pragma once
// ChaosOptions: the chaos driver's command line.

#include <cstdint>
#include <string>

namespace chaos {

struct ChaosOptions {
  int duration_s = 150;  // the chaos phase (faults injected); the run adds set-up and drain
  double rate = 300;     // messages per second written by the producers
  int producers = 2;     // producer threads
  int relays = 2;        // relay processes
  int batch_size = 200;  // relay.batch_size
  int min_kills = 20;    // fail unless at least this many relay SIGKILLs happened
  int drain_timeout_s = 120;
  unsigned seed = 0;  // 0: pick one (printed, so a run can be repeated)
  bool keep_servers = false;
  // Cluster mode (ClusterRun): 3 RabbitMQ nodes, a PostgreSQL primary and standby,
  // node and database failovers instead of the single-server faults.
  bool cluster = false;
  // Cluster mode: fail the run when any fault stopped publishing for longer than
  // this many seconds (0: only report the pauses).
  double max_pause_s = 0;
  std::string repo = OUTBOX_SOURCE_DIR;
  std::string relay_bin = OUTBOX_RELAY_BIN;
};

// Parses argv; throws std::invalid_argument naming the bad argument.
ChaosOptions parse_options(int argc, char** argv);
// The --help text.
const char* usage();

}  // namespace chaos
