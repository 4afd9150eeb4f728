// outbox-relay cleanup: delete old published rows in batches, with progress.

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <thread>

#include "admin/admin_args.h"
#include "config/preflight.h"
#include "ops/outbox_cleaner.h"
#include "outbox/duration.h"
#include "outbox/one_line.h"
#include "pg/outbox_store.h"
#include "pg/pg_connect.h"

namespace relay {
namespace {

constexpr const char* kCleanupHelp =
    "usage: outbox-relay cleanup --config FILE --older-than AGE [--batch N]\n"
    "                            [--pause-ms MS] [--dry-run] [--json]\n"
    "\n"
    "Deletes rows published more than AGE ago (90m, 12h, 7d), walking the table in\n"
    "batches of N rows (default 5000), one short transaction each, so relays keep\n"
    "claiming meanwhile. Pending and parked rows are never deleted. Takes the same\n"
    "advisory lock as the relays' retention: if one is running, cleanup exits 1.\n"
    "On a terminal it shows progress and an ETA. Ctrl-C stops after the batch in\n"
    "flight; the batches done stay done.\n"
    "\n"
    "  --older-than AGE  required; 1m to 3650d\n"
    "  --batch N         rows per batch (default 5000)\n"
    "  --pause-ms MS     pause between batches (default 0)\n"
    "  --dry-run         count the rows that would be deleted, delete nothing\n"
    "  --json            one JSON object on stdout when done\n"
    "\n"
    "exit codes: 0 done, 1 PostgreSQL failed, interrupted, or retention already\n"
    "running, 2 bad usage or configuration\n";

std::atomic<bool> g_interrupted{false};

extern "C" void on_interrupt(int) { g_interrupted = true; }

// One status line, rewritten in place on a terminal.
void show_progress(std::int64_t done, std::int64_t total, double elapsed_s) {
  const double rate = elapsed_s > 0 ? done / elapsed_s : 0;
  const double pct = total > 0 ? 100.0 * done / total : 100.0;
  const std::string eta = rate > 0 ? human_seconds((total - done) / rate) : "unknown";
  std::fprintf(stderr, "\rdeleted %lld of %lld (%.0f%%), %.0f rows/s, ETA %s   ", static_cast<long long>(done),
               static_cast<long long>(total), pct, rate, eta.c_str());
  std::fflush(stderr);
}

// Deletes in batches until done or interrupted (SIGINT/SIGTERM), pausing between
// batches and showing progress on a terminal; returns the rows deleted.
template <class Elapsed>
std::int64_t delete_older(OutboxCleaner& cleaner, const std::string& cutoff, int batch, std::int64_t total,
                          std::chrono::milliseconds pause, bool tty, Elapsed elapsed) {
  std::int64_t deleted = 0;
  deleted = cleaner.run(
      cutoff, batch,
      [&](const OutboxCleaner::Window& w) {
        deleted += w.deleted;
        if (tty) show_progress(deleted, total, elapsed());
        if (pause.count() > 0) std::this_thread::sleep_for(pause);
      },
      [&] { return !g_interrupted.load(); });
  if (tty) std::fputs("\n", stderr);
  return deleted;
}

// What a cleanup did, for its one line of output.
struct CleanupResult {
  bool dry_run;
  std::chrono::seconds age;
  std::string cutoff;
  std::int64_t matched, deleted;
  double seconds;
};

void print_result(const CleanupResult& r, bool json) {
  if (json) {
    std::cout << nlohmann::json{{"dry_run", r.dry_run}, {"older_than", outbox::format_duration(r.age)},
                                {"cutoff", r.cutoff},   {"matched", r.matched},
                                {"deleted", r.deleted}, {"interrupted", g_interrupted.load()},
                                {"seconds", r.seconds}}
                     .dump()
              << "\n";
  } else if (r.dry_run) {
    std::cout << r.matched << " row(s) published before " << r.cutoff << " would be deleted (dry run)\n";
  } else {
    std::cout << "deleted " << r.deleted << " row(s) published before " << r.cutoff << " in "
              << human_seconds(r.seconds) << (g_interrupted ? " (interrupted)" : "") << "\n";
  }
}

}  // namespace

int cmd_cleanup(const Args& raw) {
  AdminArgs args("cleanup", raw,
                 {{"--older-than", true}, {"--batch", true}, {"--pause-ms", true}, {"--dry-run"}, {"--json"}});
  if (args.help()) {
    std::cout << kCleanupHelp;
    return kExitOk;
  }
  auto older = args.value("--older-than");
  if (!older) throw UsageError("cleanup needs --older-than AGE (e.g. 7d)");
  std::chrono::seconds age{};
  try {
    age = outbox::parse_duration(*older);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--older-than: ") + e.what());
  }
  if (age < std::chrono::minutes(1)) throw UsageError("--older-than must be at least 1m");
  if (age > outbox::kMaxAge)
    throw UsageError("--older-than must be at most " + outbox::format_duration(outbox::kMaxAge) + ", got '" +
                     outbox::one_line(*older, 40) + "'");
  const int batch = static_cast<int>(args.integer("--batch", 5000, 1, 1000000));
  const auto pause = std::chrono::milliseconds(args.integer("--pause-ms", 0, 0, 60000));
  auto config = load_config_or_report(args.config_path());
  if (!config) return kExitUsage;

  const bool tty = ::isatty(STDERR_FILENO) && !args.json();
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  try {
    auto session = open_relay_session(config->postgres);
    OutboxCleaner cleaner(*session, config->postgres.schema);
    if (!cleaner.try_lock()) {
      std::cerr << "cleanup: retention or another cleanup is running on schema '" << config->postgres.schema
                << "' (advisory lock held); try again later\n";
      return kExitFailure;
    }
    const auto cutoff = cleaner.cutoff_for(age);
    const auto total = cleaner.count_older(cutoff);
    const std::int64_t deleted = args.has("--dry-run") || total == 0
                                     ? 0
                                     : delete_older(cleaner, cutoff, batch, total, pause, tty, elapsed);
    cleaner.unlock();
    print_result({args.has("--dry-run"), age, cutoff, total, deleted, elapsed()}, args.json());
    return g_interrupted ? kExitFailure : kExitOk;
  } catch (const std::exception& e) {
    if (tty) std::fputs("\n", stderr);
    std::cerr << "cleanup failed: " << admin_failure_text(e, config->postgres.schema) << "\n";
    return kExitFailure;
  }
}

}  // namespace relay
