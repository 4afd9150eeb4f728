#pragma once
// The soak phase: hours at a steady rate, to show the cost per message stays flat
// (issue 39). Not in the default --phases.

#include <nlohmann/json.hpp>

#include "bench_env.h"
#include "bench_options.h"
#include "measurements.h"

namespace bench {

// For each mode of o.soak_modes (mark: on_publish mark with retention of
// o.soak_retention_minutes; delete: on_publish delete; ordered: ordering per_key over
// 1 000 keys, mark with the same retention), one relay runs while producers commit at
// o.soak_rate for o.soak_minutes and a consumer receives. Every
// o.soak_sample_seconds: a line, a CSV row and a JSON sample (soak_report.h). At
// the end of each mode: every committed message received, the relay stopped cleanly,
// and the table of last window / first window. Leaves the table and queue empty.
nlohmann::json run_soak_phase(BenchEnv& env, const BenchOptions& o, const RelaySpec& spec);

}  // namespace bench
