#pragma once
// ClusterRun: the chaos suite's cluster mode (chaos_driver --cluster).

#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "chaos_options.h"
#include "ledger.h"
#include "publish_monitor.h"

namespace chaos {

class PrivateServers;
class ProducerPool;
class LedgerConsumer;
class RelayFleet;

// One fault on the cluster and how long publishing stopped around it.
struct ClusterFault {
  std::string kind;  // e.g. "SIGKILL of a relay's broker node"
  std::string what;  // which node, for the log
  double at_s = 0;   // since the fault phase began
  double pause_s = 0;
  // A half-open link (packets dropped for a while): publishing cannot go on until it
  // heals, so what counts is how soon it resumes after the heal (resume_s).
  bool half_open = false;
  double resume_s = 0;  // from the heal until rows were published again
};

// A 3-node RabbitMQ cluster and a PostgreSQL primary with a streaming standby
// (deploy/local/cluster.sh), producers writing ordinary events through a multi-host
// DSN, relays with amqp.uris over the three nodes publishing to a quorum queue, and
// a consumer that follows the cluster. Faults, one after another, each healed
// before the next: SIGKILL of the node relay 0 is connected to once the quorum
// queue's leader was moved there (the worst case: the relay's channel and the
// queue's leader lost at once), SIGKILL of the node a relay is connected to, SIGKILL
// of the quorum queue's leader (from the second round), a clean stop of the leader,
// each brought back; once, a failover of PostgreSQL
// (immediate stop of the primary, promotion of the standby). Then the drain and the
// ledger check of the ordinary chaos run, and a table with each fault's pause.
//
// Thread safety: none; run() owns the calling thread and starts its own.
class ClusterRun {
 public:
  explicit ClusterRun(ChaosOptions options);
  ~ClusterRun();
  ClusterRun(const ClusterRun&) = delete;
  ClusterRun& operator=(const ClusterRun&) = delete;

  // Returns the process exit code: 0 when every check passed.
  int run();

 private:
  void set_up();
  void fault_phase();
  // Runs one fault (act: the fault and its heal), waits until rows are published again
  // and a few seconds more, records the longest pause since the fault.
  void inject(const std::string& kind, const std::string& what, void (ClusterRun::*act)(int), int node,
              bool half_open = false);
  void kill_node(int node);
  void stop_and_start_node(int node);
  void fail_over_postgres(int);
  // Drops every packet to and from node's AMQP port (or the primary's PostgreSQL port)
  // for kBlackhole: a blackholed route to a server that is up.
  void blackhole_amqp(int node);
  void blackhole_postgres(int);
  int relay_node(int slot) const;  // 1..3 from the relay's log; 0 when unknown
  int leader_node();               // 1..3: the quorum queue's leader; 0 when unknown
  // Moves the quorum queue's leader to `node`; true once list_queues says it is there.
  bool move_leader(int node);
  bool drain();
  std::int64_t scalar(const std::string& sql);
  std::string write_config(const std::string& name, bool admin);
  void log(const std::string& line);

  ChaosOptions options_;
  std::chrono::steady_clock::time_point t0_, phase_start_;
  std::string log_dir_;
  std::unique_ptr<PrivateServers> servers_;
  std::unique_ptr<ProducerPool> producers_;
  Ledger ledger_;
  std::unique_ptr<LedgerConsumer> consumer_;
  std::unique_ptr<RelayFleet> relays_;
  std::unique_ptr<PublishMonitor> monitor_;
  std::vector<ClusterFault> faults_;
  int unexpected_exits_ = 0;
  bool leader_fault_skipped_ = false;
};

}  // namespace chaos
