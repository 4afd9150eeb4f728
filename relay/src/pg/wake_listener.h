#pragma once
// WakeListener: what wakes an idle relay, and the lock that says who answers producers.

#include <string>

namespace relay {

// The waiting relay's side of migration 0004: a session that holds the "a relay is
// waiting" lock while the relay is idle and receives producers' notifications.
// NotifyListener implements it on PostgreSQL; tests give WakeCoordinator a fake.
// Protocol: see NotifyListener.
//
// Errors: any std::exception from connect(), arm() and take_notifications() means
// the session failed (the caller disconnects and tries again later).
//
// Thread safety: none; one thread owns it. Implementations own a session: not copyable.
class WakeListener {
 public:
  virtual ~WakeListener() = default;

  virtual void connect() = 0;
  virtual bool connected() const = 0;
  virtual void disconnect() = 0;

  enum class Arm {
    kArmed,         // this relay holds the lock: every insert from now on notifies
    kOtherRelay,    // another idle relay holds it and answers the inserts
    kProducerBusy,  // a producer transaction that did not notify is still open
  };
  // Takes the lock. REQUIRES: connected().
  virtual Arm arm() = 0;
  enum class Release {
    kQuiet,     // nobody else need wake: the session is going, or a test
    kHandOver,  // wake the other relays' listeners: one of them takes the lock
  };
  // Releases the lock (producers stop notifying). No-op when not armed.
  virtual void disarm(Release how) = 0;
  virtual bool armed() const = 0;
  // Who held the lock at the last arm() that returned kOtherRelay, for logs.
  virtual const std::string& lock_holder() const = 0;

  // The session's socket, for poll(); -1 when not connected.
  virtual int socket() const = 0;
  struct Wake {
    bool producer = false;  // an insert's notification (or any other payload)
    bool handover = false;  // another relay gave the lock back
    bool any() const { return producer || handover; }
  };
  // What arrived on the socket since the last call (this session's own handovers
  // left out). Throws when the session is gone.
  virtual Wake take_notifications() = 0;
};

}  // namespace relay
