#pragma once
// OutboxCleaner: deletes old published rows in short batches (retention, cleanup).

#include <chrono>
#include <cstdint>
#include <string>

#include "pg/pg_session.h"

namespace relay {

// Deletes rows published before a cutoff, walking the primary key in windows of
// `batch` rows, one short transaction per window, so no statement holds many locks
// or runs long and a relay claiming meanwhile is never blocked. Pending and parked
// rows are never touched; a row replayed (made pending again) after the window was
// read is re-checked by the DELETE and kept.
//
// At most one cleaner per schema runs at a time: run it under lock() (a
// session-level advisory lock, released by unlock() or with the session).
//
// Thread safety: none; borrows a session that one thread owns.
class OutboxCleaner {
 public:
  OutboxCleaner(PgSession& session, const std::string& schema);

  // Takes the schema's retention lock without waiting; false if another session
  // (a relay's retention, or a cleanup command) holds it.
  bool try_lock();
  void unlock();

  // The cutoff for "published more than `age` ago", fixed once per run (text
  // timestamptz as the server computes it).
  std::string cutoff_for(std::chrono::seconds age);
  // Rows published before `cutoff` (a full scan: for progress reports).
  std::int64_t count_older(const std::string& cutoff);

  struct Window {
    std::int64_t deleted = 0;
    std::int64_t examined = 0;  // rows in the window (0: the end of the table)
    std::int64_t last_id = 0;   // resume after this id
    bool all_younger = false;   // every row of the window was created after cutoff
  };
  // Deletes the published-before-cutoff rows among the `batch` rows after `after_id`.
  Window delete_window(const std::string& cutoff, std::int64_t after_id, int batch);

  // Runs windows until the end of the table, or a window of rows all created after
  // the cutoff (nothing further can qualify yet), or `keep_going` returns false.
  // `on_window` sees each window (progress). Returns the rows deleted.
  template <class OnWindow, class KeepGoing>
  std::int64_t run(const std::string& cutoff, int batch, OnWindow on_window, KeepGoing keep_going) {
    std::int64_t deleted = 0, after = 0;
    while (keep_going()) {
      auto w = delete_window(cutoff, after, batch);
      deleted += w.deleted;
      on_window(w);
      if (w.examined == 0 || w.all_younger) break;
      after = w.last_id;
    }
    return deleted;
  }

 private:
  PgSession& session_;
  std::string schema_;  // plain, for the lock key
  std::string table_;   // quoted schema.outbox
};

}  // namespace relay
