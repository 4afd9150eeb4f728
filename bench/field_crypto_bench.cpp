// outbox-crypto-bench: what field encryption costs at enqueue (1, 5 and 20 sensitive
// fields, µs per message against the real PostgreSQL, with and without encryption),
// and that the relay's drain rate does not depend on it (the relay never decrypts;
// it only carries larger payloads).
//
//   outbox-crypto-bench [--messages N] [--runs R] [--drain-rows N]
//
// Reads OUTBOX_PG_DSN and OUTBOX_AMQP_URI (deploy/local/servers.sh env). Works in a
// schema, exchange and queue of its own and removes them at the end.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <random>
#include <string>
#include <vector>

#include "amqp_bench_client.h"
#include "outbox/field_encryptor.h"
#include "outbox/migrator.h"
#include "outbox/outbox_writer.h"
#include "outbox/pqxx_compat.h"
#include "outbox/schema_registry.h"
#include "relay_runner.h"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct Options {
  int messages = 2000;      // enqueues per measurement, one transaction each
  int runs = 5;             // measurements per figure; the median is printed
  long drain_rows = 20000;  // backlog per relay drain measurement; 0 skips the drain
};

enum class Mode { kPlain, kEncrypted, kSubjectKeyed };

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

std::string type_name(int fields, bool subject) { return "Bench" + std::to_string(fields) + (subject ? "S" : ""); }

// `fields` sensitive strings next to the readable id, amount and customer id.
std::string schema_yaml(int fields, bool subject) {
  std::string y = "x-event-type: " + type_name(fields, subject) + "\n";
  if (subject) y += "x-gdpr-subject: customer_id\n";
  y += "type: object\nrequired: [order_id, total_cents, customer_id]\nproperties:\n"
       "  order_id: {type: integer}\n  total_cents: {type: integer}\n  customer_id: {type: string}\n";
  for (int f = 0; f < fields; ++f) y += "  pii_" + std::to_string(f) + ": {type: string, x-gdpr-sensitive: true}\n";
  return y;
}

json payload(int fields, long n) {
  json p = {{"order_id", n}, {"total_cents", 1000 + n % 9000}, {"customer_id", "cust-" + std::to_string(n % 100)}};
  for (int f = 0; f < fields; ++f)
    p["pii_" + std::to_string(f)] = "value " + std::to_string(f) + " of order " + std::to_string(n);
  return p;
}

std::vector<outbox::Message> messages(const std::string& exchange, const std::string& type, int fields, long first,
                                      int count) {
  std::vector<outbox::Message> out;
  for (long n = first; n < first + count; ++n) {
    outbox::Message m;
    m.exchange = outbox::Exchange(exchange);
    m.routing_key = outbox::RoutingKey("rk");
    m.type = outbox::MessageType(type);
    m.payload = payload(fields, n).dump();
    out.push_back(std::move(m));
  }
  return out;
}

// This thread's CPU time: unlike wall time, it does not grow when other processes
// compete for the cores, so the encryption's own cost stays visible on a busy box.
Clock::duration thread_cpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

// Per message, inside OutboxWriter::enqueue (validation, encryption, the INSERT round
// trip), each in its own transaction as a service writes them: wall µs and the
// producer's CPU µs. BEGIN and COMMIT (the fsync) are the same with or without
// encryption and are left out.
struct EnqueueCost {
  double wall_us, cpu_us;
};

EnqueueCost enqueue_cost(pqxx::connection& conn, const outbox::OutboxWriter& writer,
                         const std::vector<outbox::Message>& ms) {
  Clock::duration wall{}, cpu{};
  for (const auto& m : ms) {
    pqxx::work tx(conn);
    const auto start = Clock::now();
    const auto cpu_start = thread_cpu();
    writer.enqueue(tx, m);
    cpu += thread_cpu() - cpu_start;
    wall += Clock::now() - start;
    tx.commit();
  }
  const auto n = static_cast<double>(ms.size());
  return {std::chrono::duration<double, std::micro>(wall).count() / n,
          std::chrono::duration<double, std::micro>(cpu).count() / n};
}

void sql(pqxx::connection& conn, const std::string& statement) {
  pqxx::nontransaction tx(conn);
  tx.exec(statement);
}

double average_payload_bytes(pqxx::connection& conn, const std::string& schema) {
  pqxx::nontransaction tx(conn);
  auto r = outbox::pgx::exec1(tx, "SELECT coalesce(avg(length(payload)), 0) FROM \"" + schema + "\".outbox");
  return r[0].as<double>();
}

// A fresh keyring (random keys, written 0600 and read back like a service would).
std::shared_ptr<const outbox::Keyring> make_keyring() {
  const std::string path = "/tmp/outbox-crypto-bench-" + std::to_string(::getpid()) + ".yaml";
  outbox::Keyring::create_file(path, "bench-1");
  auto ring = std::make_shared<const outbox::Keyring>(outbox::Keyring::load_file(path));
  ::unlink(path.c_str());
  return ring;
}

struct Setup {
  std::string dsn, amqp_uri, schema, exchange, queue;
  std::shared_ptr<const outbox::Keyring> ring = make_keyring();
  std::shared_ptr<outbox::SchemaRegistry> schemas = std::make_shared<outbox::SchemaRegistry>();
  std::shared_ptr<const outbox::SubjectKeyStore> store;

  outbox::OutboxWriter writer(Mode mode) const {
    outbox::WriterOptions o;
    o.schema = schema;
    if (mode != Mode::kPlain) {
      o.event_schemas = schemas;
      o.encryptor = std::make_shared<outbox::FieldEncryptor>(ring, store);
    }
    return outbox::OutboxWriter(o);
  }
};

void enqueue_phase(Setup& s, pqxx::connection& conn, const Options& o) {
  std::cout << "\nEnqueue cost inside OutboxWriter::enqueue: " << o.messages
            << " messages per measurement, one transaction each, median of " << o.runs << " runs, per message\n";
  std::printf("%6s  %15s  %-36s  %-38s  %s\n", "fields", "payload B", "wall µs: plain / encrypted / subject",
              "producer CPU µs: plain / enc / subject", "encryption adds (CPU)");
  long next = 1;
  for (int fields : {1, 5, 20}) {
    std::vector<double> wall[3], cpu[3];
    double bytes[2] = {0, 0};
    for (int run = 0; run < o.runs; ++run) {
      for (Mode mode : {Mode::kPlain, Mode::kEncrypted, Mode::kSubjectKeyed}) {  // interleaved: same drift for all
        const int i = static_cast<int>(mode);
        auto ms = messages(s.exchange, type_name(fields, mode == Mode::kSubjectKeyed), fields, next, o.messages);
        next += o.messages;
        const auto cost = enqueue_cost(conn, s.writer(mode), ms);
        wall[i].push_back(cost.wall_us);
        cpu[i].push_back(cost.cpu_us);
        if (mode != Mode::kSubjectKeyed) bytes[i] = average_payload_bytes(conn, s.schema);
        sql(conn, "TRUNCATE \"" + s.schema + "\".outbox");
      }
    }
    double w[3], c[3];
    for (int i = 0; i < 3; ++i) w[i] = median(wall[i]), c[i] = median(cpu[i]);
    std::printf("%6d  %5.0f -> %-6.0f  %8.0f / %8.0f / %8.0f          %7.1f / %7.1f / %7.1f           %+.1f µs\n",
                fields, bytes[0], bytes[1], w[0], w[1], w[2], c[0], c[1], c[2], c[1] - c[0]);
    std::fflush(stdout);
  }
}

// Fills the outbox with `rows` messages of `fields` sensitive fields through
// `writer`; `pad` adds a plain filler of that many bytes to each payload.
void fill(Setup& s, pqxx::connection& conn, const outbox::OutboxWriter& writer, long rows, int fields, int pad) {
  for (long done = 0; done < rows;) {
    const int n = static_cast<int>(std::min<long>(1000, rows - done));
    auto ms = messages(s.exchange, type_name(fields, false), fields, done, n);
    if (pad > 0)
      for (auto& m : ms) m.payload.insert(m.payload.size() - 1, ",\"pad\":\"" + std::string(pad, 'p') + "\"");
    pqxx::work tx(conn);
    writer.enqueue_batch(tx, ms);
    tx.commit();
    done += n;
  }
}

// Messages per second for one relay draining the outbox into the bench's queue.
double drain_rate(Setup& s, pqxx::connection& conn, bench::AmqpBenchClient& amqp, long rows,
                  const std::string& relay_bin) {
  const auto start = Clock::now();
  bench::RelayRunner relay(relay_bin, bench::relay_yaml(s.schema, 500, {}), /*exit_when_idle=*/true);
  auto usage = relay.wait_for(std::chrono::minutes(5));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!usage || usage->exit_code != 0) throw std::runtime_error("relay failed; log tail:\n" + relay.log_tail());
  if (amqp.depth(s.queue) != static_cast<std::uint32_t>(rows))
    throw std::runtime_error("drain: the queue does not hold every message");
  amqp.purge(s.queue);
  sql(conn, "TRUNCATE \"" + s.schema + "\".outbox");
  return static_cast<double>(rows) / seconds;
}

// Three backlogs: plain payloads, encrypted ones, and plain ones padded to the
// encrypted size. Equal rates for the last two show the relay pays for bytes only.
void drain_phase(Setup& s, pqxx::connection& conn, const Options& o, const std::string& relay_bin) {
  constexpr int kFields = 20;
  bench::AmqpBenchClient amqp(s.amqp_uri);
  amqp.declare(s.exchange, s.queue, "rk");
  std::vector<double> rate[3];
  double bytes[3] = {0, 0, 0};
  for (int run = 0; run < 3; ++run) {
    for (int i : {1, 0, 2}) {  // encrypted first: its size sets the padding
      const int pad = i == 2 ? std::max(0, static_cast<int>(bytes[1] - bytes[0]) - 9) : 0;
      fill(s, conn, s.writer(i == 1 ? Mode::kEncrypted : Mode::kPlain), o.drain_rows, kFields, pad);
      bytes[i] = average_payload_bytes(conn, s.schema);
      rate[i].push_back(drain_rate(s, conn, amqp, o.drain_rows, relay_bin));
    }
  }
  amqp.remove(s.exchange, s.queue);
  std::cout << "\nRelay drain: one outbox-relay, batch 500, " << o.drain_rows << " rows, " << kFields
            << " sensitive fields, median of 3 runs\n";
  const char* names[] = {"plain", "encrypted", "plain, padded to the encrypted size"};
  for (int i : {0, 1, 2})
    std::printf("  %-36s %6.0f B payloads  %7.0f msg/s  (%.2f of plain)\n", names[i], bytes[i], median(rate[i]),
                median(rate[i]) / median(rate[0]));
  std::cout << "The relay holds no key and never decrypts: it carries bytes, so only the payload size matters.\n";
}

int parse_positive(const std::string& flag, const char* v) {
  try {
    std::size_t used = 0;
    long n = std::stol(v, &used);
    if (used == std::string(v).size() && n >= 0 && n <= 100000000) return static_cast<int>(n);
  } catch (...) {
  }
  throw std::invalid_argument(flag + ": expected a non-negative integer, got '" + std::string(v) + "'");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--messages" && i + 1 < argc) o.messages = std::max(1, parse_positive(a, argv[++i]));
      else if (a == "--runs" && i + 1 < argc) o.runs = std::max(1, parse_positive(a, argv[++i]));
      else if (a == "--drain-rows" && i + 1 < argc) o.drain_rows = parse_positive(a, argv[++i]);
      else throw std::invalid_argument("unknown argument '" + a + "'");
    }
  } catch (const std::exception& e) {
    std::cerr << "outbox-crypto-bench: " << e.what()
              << "\nusage: outbox-crypto-bench [--messages N] [--runs R] [--drain-rows N]\n";
    return 2;
  }
  const char* dsn = std::getenv("OUTBOX_PG_DSN");
  const char* uri = std::getenv("OUTBOX_AMQP_URI");
  if (!dsn || !uri) {
    std::cerr << "outbox-crypto-bench: OUTBOX_PG_DSN and OUTBOX_AMQP_URI must be set (deploy/local/servers.sh env)\n";
    return 2;
  }
  Setup s;
  const std::string tag = std::to_string(::getpid()) + "_" + std::to_string(std::random_device{}() % 100000);
  s.dsn = dsn;
  s.amqp_uri = uri;
  s.schema = "crypto_bench_" + tag;
  s.exchange = "crypto_bench_x_" + tag;
  s.queue = "crypto_bench_q_" + tag;
  ::setenv("OUTBOX_BENCH_RELAY_DSN", dsn, 0);  // what bench::relay_yaml's relays connect with
  int code = 0;
  pqxx::connection conn(s.dsn);
  try {
    outbox::Migrator(s.schema).migrate(conn);
    s.store = std::make_shared<outbox::SubjectKeyStore>(s.schema, s.ring);
    for (int fields : {1, 5, 20})
      for (bool subject : {false, true})
        s.schemas->add(outbox::EventSchema::parse(schema_yaml(fields, subject), type_name(fields, subject)));
    std::cout << "outbox-crypto-bench: AES-256-GCM per sensitive field (OpenSSL EVP), PostgreSQL " << conn.hostname()
              << ":" << conn.port() << "\n";
    enqueue_phase(s, conn, o);
    if (o.drain_rows > 0) drain_phase(s, conn, o, OUTBOX_RELAY_BIN);
  } catch (const std::exception& e) {
    std::cerr << "outbox-crypto-bench: " << e.what() << "\n";
    code = 1;
  }
  sql(conn, "DROP SCHEMA IF EXISTS \"" + s.schema + "\" CASCADE");
  return code;
}
