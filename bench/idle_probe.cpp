// Queries of an idle relay, seen from the server: every statement a session starts
// moves its pg_stat_activity.query_start.
#include <chrono>
#include <map>
#include <pqxx/pqxx>
#include <thread>

#include "measurements.h"
#include "outbox/pqxx_compat.h"

namespace bench {

double measure_idle_queries(BenchEnv& env, double seconds) {
  pqxx::connection conn(env.pg_dsn());
  conn.prepare("sessions", "SELECT pid, query_start::text FROM pg_stat_activity WHERE application_name = $1");
  std::map<int, std::string> last;  // pid -> query_start
  long statements = 0;
  auto sample = [&](bool count) {
    pqxx::nontransaction tx(conn);
    for (const auto& r : outbox::pgx::exec_prepared(tx, "sessions", env.relay_application_name())) {
      int pid = r[0].as<int>();
      std::string start = r[1].is_null() ? "" : r[1].c_str();
      auto it = last.find(pid);
      if (it == last.end()) {
        last.emplace(pid, start);
        if (count) ++statements;  // a session opened during the window
      } else if (it->second != start) {
        it->second = start;
        if (count) ++statements;
      }
    }
  };
  sample(false);
  if (last.empty()) throw BenchError("idle: no session of the relay found in pg_stat_activity");
  const auto start = std::chrono::steady_clock::now();
  const auto length =
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
  while (std::chrono::steady_clock::now() - start < length) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    sample(true);
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(statements) / elapsed;
}

}  // namespace bench
