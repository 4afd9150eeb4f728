#include "pg/notify_listener.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <pqxx/pqxx>
#include <utility>

#include "outbox/one_line.h"
#include "outbox/pqxx_compat.h"
#include "pg/outbox_store.h"
#include "pg/pg_connect.h"

namespace relay {
namespace {

// The advisory lock of migration 0004: (this class id, hashtext(schema)).
constexpr const char* kLockKey = "1868724338, hashtext($1)";

std::string describe_holder(long long pid, const std::string& user, const std::string& application, bool relay) {
  const std::string who = "pid " + std::to_string(pid) + ", user '" + outbox::one_line(user, 64) + "', application '" +
                          outbox::one_line(application, 64) + "'";
  return relay ? "another relay (" + who + ")" : "a session that does not look like a relay (" + who + ")";
}

}  // namespace

// Sorts what arrives on the channel (libpqxx calls it from get_notifs()).
class NotifyListener::Receiver {
 public:
  explicit Receiver(int own_pid) : own_pid_(own_pid) {}
  void take(std::string_view payload, int backend_pid) {
    if (payload != kHandoverPayload) wake.producer = true;
    else if (backend_pid != own_pid_) wake.handover = true;
  }
  Wake wake;

 private:
  int own_pid_;
#if PQXX_VERSION_MAJOR < 7
  // libpqxx 6.4's way to LISTEN (7.10 deprecates it for connection::listen).
  class Registration : public pqxx::notification_receiver {
   public:
    Registration(pqxx::connection& conn, const std::string& channel, Receiver& receiver)
        : pqxx::notification_receiver(conn, channel), receiver_(receiver) {}
    void operator()(const std::string& payload, int backend_pid) override { receiver_.take(payload, backend_pid); }

   private:
    Receiver& receiver_;
  };
  std::unique_ptr<Registration> registration_;
#endif

 public:
  // LISTENs on `channel` and hands what arrives to take().
  void listen(pqxx::connection& conn, const std::string& channel) {
#if PQXX_VERSION_MAJOR >= 7
    conn.listen(channel, [this](pqxx::notification n) { take(n.payload, n.backend_pid); });
#else
    registration_ = std::make_unique<Registration>(conn, channel, *this);
#endif
  }
};

NotifyListener::NotifyListener(PostgresConfig config, std::chrono::milliseconds lock_wait)
    : config_(std::move(config)), lock_wait_(lock_wait) {}

NotifyListener::~NotifyListener() { disconnect(); }

std::string NotifyListener::channel_of(const std::string& schema) { return ("outbox_" + schema).substr(0, 63); }

bool NotifyListener::connected() const { return conn_ && conn_->is_open(); }

void NotifyListener::disconnect() {
  // Closed first, so the receiver's removal sends no UNLISTEN (and libpqxx does not
  // reconnect a broken session to send it).
  if (conn_) outbox::close_pg_connection(*conn_);
  if (session_.first != 0) previous_session_ = std::exchange(session_, {});
  receiver_.reset();
  conn_.reset();  // the server releases the session's lock with it
  armed_ = false;
}

int NotifyListener::socket() const { return connected() ? conn_->sock() : -1; }

void NotifyListener::connect() {
  disconnect();
  auto conn = connect_postgres(config_);
  pqxx::nontransaction setup(*conn);
  setup.exec("SET statement_timeout = " + std::to_string(config_.statement_timeout_ms));
  setup.exec("SET lock_timeout = " + std::to_string(std::max<long long>(1, lock_wait_.count())));
  end_previous_session(setup);
  const auto me =
      outbox::pgx::exec1(setup, "SELECT pid, backend_start::text FROM pg_stat_activity WHERE pid = pg_backend_pid()");
  session_ = {me[0].as<int>(), me[1].as<std::string>()};
  setup.commit();
  auto receiver = std::make_unique<Receiver>(conn->backendpid());
  receiver->listen(*conn, channel_of(config_.schema));
  conn->prepare("notify_try_lock", std::string("SELECT pg_try_advisory_lock(") + kLockKey + ")");
  conn->prepare("notify_lock", std::string("SELECT pg_advisory_lock(") + kLockKey + ")");
  conn->prepare("notify_unlock", std::string("SELECT pg_advisory_unlock(") + kLockKey + ")");
  // One statement: the notification goes out when the lock is already free.
  conn->prepare("notify_hand_over",
                std::string("SELECT pg_advisory_unlock(") + kLockKey + "), pg_notify($2, '" + kHandoverPayload + "')");
  // Who holds the lock exclusively: a relay, by its application_name (this session's,
  // or the default 'outbox-relay'), or else a session that may have taken it by hand
  // (a producer, an operator) or a relay given another application_name.
  conn->prepare("notify_lock_holder",
                "SELECT l.pid, coalesce(a.usename::text, '') AS usename, "
                "coalesce(a.application_name, '') AS application_name, "
                "(coalesce(a.application_name, '') IN (current_setting('application_name'), 'outbox-relay')) AS relay "
                "FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE l.locktype = 'advisory' AND l.granted "
                "AND l.mode = 'ExclusiveLock' AND l.objsubid = 2 AND l.classid = 1868724338 "
                "AND l.objid = hashtext($1)::oid "
                "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) LIMIT 1");
  conn_ = std::move(conn);
  receiver_ = std::move(receiver);
}

void NotifyListener::end_previous_session(pqxx::transaction_base& tx) {
  if (previous_session_.first == 0) return;
  const auto [pid, started] = std::exchange(previous_session_, {});
  try {
    // Allowed for a session of the same role (pg_terminate_backend's rule).
    const auto r = outbox::pgx::exec_params(tx,
                                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                            "WHERE pid = $1 AND backend_start::text = $2",
                                            pid, started);
    if (!r.empty() && r[0][0].as<bool>())
      spdlog::info(
          "ended this relay's previous listener session (pid {}), which the server still kept after the link "
          "was lost: it held the waiting lock",
          pid);
  } catch (const pqxx::sql_error& e) {
    spdlog::warn("cannot end this relay's previous listener session (pid {}): {}", pid, outbox::one_line(e.what()));
  }
}

NotifyListener::Arm NotifyListener::arm() {
  if (armed_) return Arm::kArmed;
  {
    pqxx::nontransaction tx(*conn_);
    if (outbox::pgx::exec_prepared1(tx, "notify_try_lock", config_.schema)[0].as<bool>()) {
      armed_ = true;
      return Arm::kArmed;
    }
    // Producers take the lock in shared mode only: an exclusive holder is a relay, or
    // a session that took it by hand. Either way it, not this relay, is notified.
    auto holder = outbox::pgx::exec_prepared(tx, "notify_lock_holder", config_.schema);
    if (!holder.empty()) {
      lock_holder_ = describe_holder(holder[0]["pid"].as<long long>(), holder[0]["usename"].c_str(),
                                     holder[0]["application_name"].c_str(), holder[0]["relay"].as<bool>());
      return Arm::kOtherRelay;
    }
  }
  // Producer transactions are still open. Queueing for the lock makes every newer
  // producer notify, and the open ones usually end within milliseconds; the
  // session's lock_timeout bounds the wait.
  try {
    pqxx::nontransaction tx(*conn_);
    outbox::pgx::exec_prepared(tx, "notify_lock", config_.schema);
    armed_ = true;
    return Arm::kArmed;
  } catch (const pqxx::sql_error& e) {
    if (e.sqlstate() != "55P03") throw;  // lock_not_available: the wait timed out
    return Arm::kProducerBusy;
  }
}

void NotifyListener::disarm(Release how) {
  if (!armed_) return;
  armed_ = false;
  pqxx::nontransaction tx(*conn_);
  if (how == Release::kHandOver)
    outbox::pgx::exec_prepared(tx, "notify_hand_over", config_.schema, channel_of(config_.schema));
  else outbox::pgx::exec_prepared(tx, "notify_unlock", config_.schema);
}

NotifyListener::Wake NotifyListener::take_notifications() {
  if (!connected()) return {};
  conn_->get_notifs();  // calls receiver_
  return std::exchange(receiver_->wake, Wake{});
}

}  // namespace relay
