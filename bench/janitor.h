#pragma once
// Janitor: what a bench run made outside its own process is removed however the run
// ends, killed by a signal included.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace bench {

// A run makes things that outlive it unless removed: a schema, an exchange and
// queues, relay processes with their configuration and log files, and
// (--broker-cpus) the broker's and PostgreSQL's CPU affinity. Destructors remove them,
// but a run killed by Ctrl-C, SIGTERM, SIGKILL or a timeout, or aborted by an
// exception in a thread, runs no destructor. start() forks a janitor process, before
// the run starts any thread, holding one end of a socket pair: each thing is
// recorded there when made and forgotten once its owner removed it. When the socket
// closes, at finish() or because the run died however it died, the janitor undoes
// what is still recorded, the most recent first (relays before the queue before the
// schema), prints what it did to stderr, one whole line per record and a last line
// "outbox-bench: cleanup after the run: done: N undone, M failed" (when anything was
// left), and exits: a reader waits for that line to know the cleanup is over. It ignores the signals a terminal
// sends to the whole foreground group (Ctrl-C, Ctrl-\, hang-up) and SIGTERM.
//
// Thread safety: record() and forget() may be called from any thread; start() and
// finish() from the main thread only. Before start() (and in other programs, such as
// outbox-crypto-bench) record() and forget() do nothing.
class Janitor {
 public:
  using Id = std::uint64_t;
  // A record's fields: names and paths the bench made itself, so none holds
  // whitespace; a field may be empty (the default exchange is "").
  using Fields = std::vector<std::string>;
  // Undoes one record; returns what it did ("dropped schema bench_1_2"); throws
  // std::exception with the reason when it could not. Runs in the janitor process.
  using Undo = std::function<std::string(const Fields&)>;

  // REQUIRES: no thread started yet (fork), called once. `undo_by_kind`: how to
  // undo each kind of record. Throws BenchError when the socket pair or the fork fails.
  static void start(std::map<std::string, Undo> undo_by_kind);
  // Closes the socket and waits for the janitor, which undoes what is still recorded
  // (nothing when every owner removed its own). No effect without start().
  static void finish();

  // Records a thing just made; returns the id to forget() once its owner removed it.
  // REQUIRES: `kind` is one start() was given; no field holds whitespace.
  static Id record(const std::string& kind, const Fields& fields);
  static void forget(Id id);
};

}  // namespace bench
