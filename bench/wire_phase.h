#pragma once
// The wire phase: what each part of the message the relay sends costs the broker,
// and what the relay's lean settings and delete-at-ack gain, measured in one run.

#include <nlohmann/json.hpp>

#include "bench_env.h"
#include "bench_options.h"
#include "measurements.h"

namespace bench {

// Broker ceilings of a bare message and of each property alone on top of it (and of
// the relay's contract minimum and default), then one-relay drains with the default
// settings, the lean ones (amqp.send_* false, an alternate exchange instead of
// mandatory) and relay.on_publish: delete, each as a ratio to its own ceiling.
// Prints a table; returns it as JSON. Leaves the table and the queue empty.
nlohmann::json run_wire_phase(BenchEnv& env, const BenchOptions& o, const RelaySpec& spec);

}  // namespace bench

namespace bench {

// Fan-out: the run's exchange with `queues` durable queues bound to the routing key
// (as one queue per consuming service), its broker ceiling and the drain of 1 and 2
// relays on it, as ratios; for 1 and for `queues` queues. Extra queues are deleted.
nlohmann::json run_fanout_phase(BenchEnv& env, const BenchOptions& o, const RelaySpec& spec, int queues);

}  // namespace bench
