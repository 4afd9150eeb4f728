#include "test_env.h"

#include "outbox/rabbitmq_c.h"
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <pqxx/pqxx>
#include <random>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "outbox/migrator.h"

namespace testenv {
namespace {

std::string required_env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v)
    throw std::runtime_error(std::string(name) +
                             " is not set: start the servers with deploy/local/servers.sh start "
                             "and source the env file it prints");
  return v;
}

std::string str(amqp_bytes_t b) { return std::string(static_cast<const char*>(b.bytes), b.len); }

void check(amqp_rpc_reply_t r, const char* what) {
  if (r.reply_type != AMQP_RESPONSE_NORMAL) throw std::runtime_error(std::string("test broker: ") + what + " failed");
}

}  // namespace

std::string pg_dsn() { return required_env("OUTBOX_PG_DSN"); }
std::string amqp_uri() { return required_env("OUTBOX_AMQP_URI"); }
AmqpEndpoint shared_amqp_endpoint() { return amqp_endpoint_of(amqp_uri()); }

int pg_port() {
  std::smatch m;
  const auto dsn = pg_dsn();
  if (!std::regex_search(dsn, m, std::regex(R"(port=(\d+))")))
    throw std::runtime_error("OUTBOX_PG_DSN names no port=: " + dsn);
  return std::stoi(m[1]);
}

int amqp_port() { return shared_amqp_endpoint().port; }

std::string pg_dsn_via(int port) {
  return std::regex_replace(pg_dsn(), std::regex(R"(port=\d+)"), "port=" + std::to_string(port));
}

std::string amqp_uri_via(int port) {
  const auto e = shared_amqp_endpoint();
  return "amqp://" + percent_encoded(e.user) + ":" + percent_encoded(e.password) +
         "@127.0.0.1:" + std::to_string(port) + "/" + percent_encoded(e.vhost);
}

std::string unique_name(const std::string& prefix) {
  static std::atomic<int> counter{0};
  static const unsigned salt = std::random_device{}() % 100000;
  return prefix + "_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + "_" + std::to_string(salt);
}

ScopedSchema::ScopedSchema(const std::string& prefix, std::optional<int> version) : name_(unique_name(prefix)) {
  pqxx::connection conn(pg_dsn());
  if (version) outbox::Migrator(name_).migrate_to(conn, *version);
  else outbox::Migrator(name_).migrate(conn);
}

void ScopedSchema::migrate() {
  pqxx::connection conn(pg_dsn());
  outbox::Migrator(name_).migrate(conn);
}

ScopedSchema::~ScopedSchema() {
  try {
    sql_exec("DROP SCHEMA IF EXISTS \"" + name_ + "\" CASCADE");
  } catch (...) {
  }
}

std::string sql_value(const std::string& sql) {
  pqxx::connection conn(pg_dsn());
  pqxx::nontransaction tx(conn);
  auto r = tx.exec(sql);
  if (r.empty() || r[0][0].is_null()) return "";
  return r[0][0].c_str();
}

void sql_exec(const std::string& sql) {
  pqxx::connection conn(pg_dsn());
  pqxx::nontransaction tx(conn);
  tx.exec(sql);
}

std::string sql_error_of(const std::string& sql) {
  try {
    sql_exec(sql);
  } catch (const pqxx::sql_error& e) {
    return e.sqlstate() + ": " + e.what();
  }
  return "nothing raised";
}

TestBroker::TestBroker(const std::string& prefix, const std::string& routing_key, const std::string& alternate_exchange)
    : exchange_(unique_name(prefix + "_x")), queue_(unique_name(prefix + "_q")), routing_key_(routing_key) {
  client_.emplace(shared_amqp_endpoint());
  amqp_table_entry_t ae;
  ae.key = amqp_cstring_bytes("alternate-exchange");
  ae.value.kind = AMQP_FIELD_KIND_UTF8;
  ae.value.value.bytes = amqp_cstring_bytes(alternate_exchange.c_str());
  const amqp_table_t args = alternate_exchange.empty() ? amqp_empty_table : amqp_table_t{1, &ae};
  client_->declare_exchange(exchange_, "direct", /*durable=*/true, /*internal=*/false, args);
  client_->declare_queue(queue_, /*durable=*/true);
  client_->bind(queue_, exchange_, routing_key_);
}

TestBroker::~TestBroker() {
  if (!client_) return;
  try {
    AmqpTestClient cleanup(shared_amqp_endpoint());  // the consuming channel may be busy
    cleanup.delete_queue(queue_);
    cleanup.delete_exchange(exchange_);
  } catch (...) {
  }
  client_->abandon();  // no connection.close on the consuming connection
}

void TestBroker::start_consuming() {
  if (consuming_) return;
  amqp_connection_state_t conn = client_->conn();
  amqp_basic_qos(conn, 1, 0, 1000, 0);
  check(amqp_get_rpc_reply(conn), "basic.qos");
  amqp_basic_consume(conn, 1, amqp_cstring_bytes(queue_.c_str()), amqp_empty_bytes, 0, 1, 0, amqp_empty_table);
  check(amqp_get_rpc_reply(conn), "basic.consume");
  consuming_ = true;
}

std::vector<Received> TestBroker::receive(std::size_t count, std::chrono::milliseconds idle) {
  start_consuming();
  amqp_connection_state_t conn = client_->conn();
  std::vector<Received> out;
  while (out.size() < count) {
    amqp_envelope_t env;
    amqp_maybe_release_buffers(conn);
    timeval tv{static_cast<time_t>(idle.count() / 1000), static_cast<suseconds_t>((idle.count() % 1000) * 1000)};
    auto r = amqp_consume_message(conn, &env, &tv, 0);
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && r.library_error == AMQP_STATUS_TIMEOUT) break;
    if (r.reply_type != AMQP_RESPONSE_NORMAL) throw std::runtime_error("test broker: consume failed");
    Received m;
    m.body = str(env.message.body);
    const auto& p = env.message.properties;
    if (p._flags & AMQP_BASIC_MESSAGE_ID_FLAG) m.message_id = str(p.message_id);
    if (p._flags & AMQP_BASIC_TYPE_FLAG) m.type = str(p.type);
    if (p._flags & AMQP_BASIC_CONTENT_TYPE_FLAG) m.content_type = str(p.content_type);
    if (p._flags & AMQP_BASIC_CORRELATION_ID_FLAG) m.correlation_id = str(p.correlation_id);
    if (p._flags & AMQP_BASIC_TIMESTAMP_FLAG) m.timestamp = p.timestamp;
    m.persistent = (p._flags & AMQP_BASIC_DELIVERY_MODE_FLAG) && p.delivery_mode == 2;
    if (p._flags & AMQP_BASIC_HEADERS_FLAG) {
      for (int i = 0; i < p.headers.num_entries; ++i) {
        const auto& e = p.headers.entries[i];
        if (e.value.kind == AMQP_FIELD_KIND_UTF8 || e.value.kind == AMQP_FIELD_KIND_BYTES)
          m.headers[str(e.key)] = str(e.value.value.bytes);
        else if (e.value.kind == AMQP_FIELD_KIND_I64) m.headers[str(e.key)] = std::to_string(e.value.value.i64);
      }
    }
    out.push_back(std::move(m));
    amqp_destroy_envelope(&env);
  }
  return out;
}

std::uint32_t TestBroker::ready_count() {
  AmqpTestClient c(shared_amqp_endpoint());
  const auto counts = c.queue_counts(queue_);
  if (!counts) throw std::runtime_error("test broker: queue.declare passive failed");
  return counts->ready;
}

bool port_free(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

std::string percent_encoded(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') out += static_cast<char>(c);
    else out += std::string("%") + hex[c >> 4] + hex[c & 15];
  }
  return out;
}

std::string single_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  return out + "'";
}

bool eventually(std::chrono::milliseconds limit, const std::function<bool()>& done, std::chrono::milliseconds poll) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(poll);
  }
  return done();
}

std::string leaked_fragment(const std::string& text, const std::string& secret) {
  for (std::size_t i = 0; i + 4 <= secret.size(); ++i)
    if (text.find(secret.substr(i, 4)) != std::string::npos) return secret.substr(i, 4);
  return "";
}

int lines_with(const std::string& text, const std::string& needle) {
  int n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

}  // namespace testenv
