#pragma once
// The scheduled phase (issue 41): how late scheduled messages go out at a steady rate,
// against the same pipeline's latency for unscheduled ones at that rate.

#include <nlohmann/json.hpp>

#include "bench_env.h"
#include "bench_options.h"
#include "measurements.h"

namespace bench {

// For each rate of o.scheduled_rates, one relay runs while producers commit one
// message per transaction at that rate for o.scheduled_seconds, each scheduled
// kScheduleAhead (2 s) ahead (deliver_at by the bench host's clock, which is the
// database's here); a consumer takes them. Lateness: receipt - deliver_at. Then the
// same rate unscheduled, latency commit -> receipt: the floor lateness is compared
// with (a scheduled message cannot go out faster than an unscheduled one). Fails
// (BenchError) when a message is lost or arrives before its deliver_at.
nlohmann::json run_scheduled_phase(BenchEnv& env, const BenchOptions& o, const RelaySpec& spec);

}  // namespace bench
