#pragma once
// NotifyListener: wakes an idle relay when a producer inserts (migration 0004).

#include <chrono>
#include <memory>
#include <string>

#include "config/config.h"

#include <pqxx/connection>

namespace relay {

// A PostgreSQL session of its own, never inside a transaction, that LISTENs on the
// schema's channel and holds the "a relay is waiting" advisory lock while the relay
// is idle. Producers notify only while some relay holds that lock (see
// schema/migrations/0004_notify.sql), so a busy relay costs them nothing.
//
// Protocol for the relay: when it runs out of work, arm(); if kArmed, claim once more
// (every insert that did not notify has ended by now), then wait on socket() and
// call take_notifications(); once it is busy (ListenArmPolicy), disarm().
//
// Thread safety: none; the relay loop's thread owns it. Owns a connection: not copyable.
class NotifyListener {
 public:
  // `lock_wait`: how long arm() waits for open producer transactions.
  NotifyListener(PostgresConfig config, std::chrono::milliseconds lock_wait);
  ~NotifyListener();
  NotifyListener(const NotifyListener&) = delete;
  NotifyListener& operator=(const NotifyListener&) = delete;

  // Connects and LISTENs. Throws pqxx::broken_connection (and pqxx errors).
  void connect();
  bool connected() const;
  void disconnect();

  enum class Arm {
    kArmed,           // this relay holds the lock: every insert from now on notifies
    kOtherRelay,      // another idle relay holds it: inserts notify all listeners
    kProducerBusy,    // a producer transaction that did not notify is still open
  };
  // Takes the lock, waiting at most `lock_wait` for producer transactions still open.
  // REQUIRES: connected(). Throws pqxx errors when the session fails.
  Arm arm();
  // Releases the lock (producers stop notifying). No-op when not armed.
  void disarm();
  bool armed() const { return armed_; }

  // The session's socket, for poll(); -1 when not connected.
  int socket() const;
  // Reads what arrived on the socket; true if any notification came since the last
  // call. Throws pqxx::broken_connection when the session is gone.
  bool take_notifications();

  // The channel of a schema: left('outbox_' || schema, 63), as the trigger computes it.
  static std::string channel_of(const std::string& schema);

 private:
  PostgresConfig config_;
  std::chrono::milliseconds lock_wait_;
  std::unique_ptr<pqxx::connection> conn_;
  bool armed_ = false;
};

}  // namespace relay
