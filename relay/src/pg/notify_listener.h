#pragma once
// NotifyListener: wakes an idle relay when a producer inserts (migration 0004).

#include <chrono>
#include <memory>
#include <pqxx/connection>
#include <string>

#include "config/config.h"
#include "pg/wake_listener.h"

namespace relay {

// A PostgreSQL session of its own, never inside a transaction, that LISTENs on the
// schema's channel and holds the "a relay is waiting" advisory lock while the relay
// is idle. Producers notify only while some relay holds that lock (see
// schema/migrations/0004_notify.sql), so a busy relay costs them nothing.
//
// Protocol for the relay: when it runs out of work, arm(); if kArmed, claim once more
// (every insert that did not notify has ended by now), then wait on socket() and
// call take_notifications(); once it is busy (ListenArmPolicy), or cannot work,
// disarm(kHandOver).
//
// Only the holder of the lock answers producers' notifications; the other relays
// (kOtherRelay) wait for a handover: the holder's NOTIFY with payload
// kHandoverPayload, sent in the statement that gives the lock back, so one of them
// takes it at once (docs/ARCHITECTURE.md, "Processes and threads").
//
// Thread safety: none; the relay loop's thread owns it. Owns a connection: not copyable.
class NotifyListener : public WakeListener {
 public:
  // `lock_wait`: how long arm() waits for open producer transactions.
  NotifyListener(PostgresConfig config, std::chrono::milliseconds lock_wait);
  ~NotifyListener() override;
  NotifyListener(const NotifyListener&) = delete;
  NotifyListener& operator=(const NotifyListener&) = delete;

  // Connects and LISTENs. Throws pqxx::broken_connection (and pqxx errors). Ends
  // this listener's previous session first if the server still keeps it: after a
  // half-open link the server does not know the client is gone, and that session
  // would hold the waiting lock for hours (the server's own keepalives), so no relay
  // got producers' notifications (only pg_stat_activity's pid and backend_start
  // together name it: a pid alone may have been reused).
  void connect() override;
  bool connected() const override;
  void disconnect() override;

  // Takes the lock, waiting at most `lock_wait` for producer transactions still open.
  // REQUIRES: connected(). Throws pqxx errors when the session fails.
  Arm arm() override;
  // Releases the lock (producers stop notifying). No-op when not armed.
  void disarm(Release how) override;
  bool armed() const override { return armed_; }
  // Who held the lock at the last arm() that returned kOtherRelay: "another relay
  // (pid 4711, user 'relay', application 'outbox-relay')", or "a session that does
  // not look like a relay (...)" when its application_name is neither this session's
  // nor 'outbox-relay'.
  const std::string& lock_holder() const override { return lock_holder_; }

  // The session's socket, for poll(); -1 when not connected.
  int socket() const override;
  // Reads what arrived on the socket. The session's own handovers are left out.
  // Throws pqxx::broken_connection when the session is gone.
  Wake take_notifications() override;

  // The payload of a handover NOTIFY; producers' notifications carry ''.
  static constexpr const char* kHandoverPayload = "relay-handover";

  // The channel of a schema: left('outbox_' || schema, 63), as the trigger computes it.
  static std::string channel_of(const std::string& schema);

 private:
  void end_previous_session(pqxx::transaction_base& tx);

  PostgresConfig config_;
  std::chrono::milliseconds lock_wait_;
  class Receiver;
  std::unique_ptr<pqxx::connection> conn_;
  std::unique_ptr<Receiver> receiver_;  // registered on conn_: destroyed first
  bool armed_ = false;
  std::string lock_holder_;
  // This listener's session on the server (pid, backend_start), the one before it.
  std::pair<int, std::string> session_, previous_session_;
};

}  // namespace relay
