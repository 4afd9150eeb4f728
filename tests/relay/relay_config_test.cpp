#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "config/config.h"
#include "config/rfc3339.h"
#include "outbox/pg_conninfo.h"
#include "test_text.h"

using relay::ConfigError;
using relay::load_config;
using relay::parse_config;

namespace {

const std::string kValid =
    "postgres:\n"
    "  dsn: host=db user=relay password=${TEST_PG_SECRET}\n"
    "  schema: outbox\n"
    "amqp:\n"
    "  uri: amqp://relay:hunter2@mq:5672/\n"
    "  heartbeat_s: 10\n"
    "  confirm_timeout_ms: 20000\n"
    "relay:\n"
    "  batch_size: 250\n"
    "  backoff_factor: 1.5\n";

// The ConfigError message for `yaml`, or "(accepted)".
std::string config_error(const std::string& yaml) {
  return testenv::error_of<ConfigError>([&] { parse_config(yaml, "relay.yaml"); }, "(accepted)");
}

using testenv::contains;

std::string replace(std::string s, const std::string& from, const std::string& to) {
  auto pos = s.find(from);
  REQUIRE(pos != std::string::npos);
  return s.replace(pos, from.size(), to);
}

struct SecretEnv {
  SecretEnv() { setenv("TEST_PG_SECRET", "s3cr3t-value", 1); }
  ~SecretEnv() { unsetenv("TEST_PG_SECRET"); }
};

}  // namespace

TEST_CASE("a valid file is parsed with defaults for what it leaves out and ${ENV} expanded") {
  SecretEnv env;
  auto c = parse_config(kValid, "relay.yaml");
  CHECK(c.postgres.dsn == "host=db user=relay password=s3cr3t-value");
  CHECK(c.amqp.heartbeat_s == 10);
  CHECK(c.relay.batch_size == 250);
  CHECK(c.relay.backoff_factor == doctest::Approx(1.5));
  CHECK(c.relay.max_attempts == 10);                       // default
  CHECK(c.relay.max_payload_bytes == 16 * 1024 * 1024);    // default
  CHECK(c.amqp.publish_window == 1024);                    // default
  CHECK(c.amqp.publish_window_bytes == 64 * 1024 * 1024);  // default
  CHECK(c.log.level == relay::LogLevel::kInfo);            // default
  CHECK(c.log.format == relay::LogFormat::kText);          // default
}

TEST_CASE("malformed YAML names the file and line") {
  auto e = config_error("postgres:\n  dsn: [unclosed\n");
  CHECK(contains(e, "relay.yaml:"));
  CHECK(contains(e, "malformed YAML"));
}

TEST_CASE("an unknown key is an error naming its path and line") {
  SecretEnv env;
  auto e = config_error(replace(kValid, "  batch_size: 250\n", "  batch_size: 250\n  bach_size: 3\n"));
  CHECK(contains(e, "relay.bach_size: unknown key"));
  CHECK(contains(e, "relay.yaml:10:"));
  CHECK(contains(config_error(kValid + "extra:\n  a: 1\n"), "extra: unknown section"));
}

TEST_CASE("a misspelled key or section is refused suggesting the one meant") {
  SecretEnv env;
  auto e = config_error(replace(kValid, "  batch_size: 250\n", "  batch_sise: 250\n"));
  CHECK_MESSAGE(contains(e, "relay.yaml:9: relay.batch_sise: unknown key (did you mean 'batch_size'?)"), e);
  e = config_error(replace(kValid, "relay:\n", "relya:\n"));
  CHECK_MESSAGE(contains(e, "relya: unknown section (did you mean 'relay'?)"), e);
  // No guess when nothing is near.
  e = config_error(replace(kValid, "  batch_size: 250\n", "  compression: zstd\n"));
  CHECK_MESSAGE(contains(e, "relay.compression: unknown key"), e);
  CHECK_FALSE(contains(e, "did you mean"));
}

TEST_CASE("a misspelled required key is named with the missing one, not only 'is required'") {
  SecretEnv env;
  const auto e = config_error(replace(kValid, "  dsn: host=db", "  dns: host=db"));
  CHECK_MESSAGE(contains(e, "postgres.dsn: is required ('dns' on line 2 is not a key: did you mean 'dsn'?)"), e);
  CHECK_FALSE(contains(e, "host=db"));  // the value, which may hold a secret, is not shown
}

TEST_CASE("an unknown key is reported even when a required key is missing, and both are named") {
  SecretEnv env;
  // The newcomer's file: the DSN's key misspelled, and a relay setting misspelled.
  auto e = config_error(replace(replace(kValid, "  dsn: host=db", "  dns: host=db"), "  batch_size: 250\n",
                                "  batch_sise: 250\n"));
  CHECK_MESSAGE(contains(e, "relay.yaml:9: relay.batch_sise: unknown key (did you mean 'batch_size'?); and "), e);
  CHECK_MESSAGE(contains(e, "postgres.dsn: is required ('dns' on line 2 is not a key: did you mean 'dsn'?)"), e);
  // Two required keys missing: both named, in the order of the file.
  e = config_error(replace(replace(kValid, "  dsn: host=db", "  dns: host=db"), "  uri: ", "  url: "));
  CHECK_MESSAGE(contains(e, "postgres.dsn: is required"), e);
  CHECK_MESSAGE(contains(e, "; and relay.yaml:"), e);
  CHECK_MESSAGE(contains(e, "amqp.uri: is required ('url' on line"), e);
  CHECK_FALSE(contains(e, "must start with amqp://"));  // no second error about the absent value
}

TEST_CASE("a wrong type is an error naming the key and the value") {
  SecretEnv env;
  auto e = config_error(replace(kValid, "batch_size: 250", "batch_size: lots"));
  CHECK(contains(e, "relay.yaml:9: relay.batch_size: expected an integer, got 'lots'"));
  CHECK(contains(config_error(replace(kValid, "backoff_factor: 1.5", "backoff_factor: [1]")),
                 "relay.backoff_factor: expected a number"));
  CHECK(contains(config_error(replace(kValid, "schema: outbox", "schema: {a: 1}")),
                 "postgres.schema: expected a string, got a mapping"));
}

TEST_CASE("zero or negative sizes are out of range, with the allowed range in the message") {
  SecretEnv env;
  CHECK(contains(config_error(replace(kValid, "batch_size: 250", "batch_size: 0")),
                 "relay.batch_size: must be between 1 and 100000, got 0"));
  CHECK(contains(config_error(replace(kValid, "batch_size: 250", "batch_size: -5")),
                 "relay.batch_size: must be between 1 and 100000, got -5"));
}

TEST_CASE("a confirm timeout shorter than the heartbeat is refused") {
  SecretEnv env;
  auto e = config_error(replace(kValid, "confirm_timeout_ms: 20000", "confirm_timeout_ms: 5000"));
  CHECK(contains(e, "amqp.confirm_timeout_ms: must be at least amqp.heartbeat_s"));
}

TEST_CASE("an idle-in-transaction timeout not above the confirm timeout is refused") {
  SecretEnv env;
  auto e = config_error(replace(kValid, "  schema: outbox\n",
                                "  schema: outbox\n  idle_in_transaction_timeout_ms: 20000\n"));
  CHECK(contains(e, "postgres.idle_in_transaction_timeout_ms: must exceed amqp.confirm_timeout_ms"));
}

TEST_CASE("a missing required key or section is named") {
  SecretEnv env;
  CHECK(contains(config_error("amqp:\n  uri: amqp://x/\n"), "postgres: section is required"));
  CHECK(contains(config_error(replace(kValid, "  dsn: host=db user=relay password=${TEST_PG_SECRET}\n", "")),
                 "postgres.dsn: is required"));
  CHECK(contains(config_error(""), "the file is empty"));
}

TEST_CASE("an unset environment variable is named, and secrets never appear in errors") {
  auto e = config_error(kValid);  // TEST_PG_SECRET unset
  CHECK(contains(e, "postgres.dsn: environment variable 'TEST_PG_SECRET' is not set"));
  SecretEnv env;
  auto bad_uri = config_error(replace(kValid, "uri: amqp://relay:hunter2@mq:5672/", "uri: http://relay:hunter2@mq/"));
  CHECK(contains(bad_uri, "amqp.uri: must start with amqp:// or amqps://"));
  CHECK_FALSE(contains(bad_uri, "hunter2"));
  auto bad_type = config_error(replace(kValid, "heartbeat_s: 10", "heartbeat_s: ten"));
  CHECK_FALSE(contains(bad_type, "hunter2"));
  CHECK_FALSE(contains(bad_type, "s3cr3t"));
}

TEST_CASE("hostile schema names are refused with the value shown") {
  SecretEnv env;
  for (std::string bad : {"\"x; DROP TABLE y\"", "'Outbox'", "\"schéma\""}) {
    auto e = config_error(replace(kValid, "schema: outbox", "schema: " + bad));
    CHECK_MESSAGE(contains(e, "postgres.schema: "), e);
    CHECK_MESSAGE(contains(e, "not a plain identifier"), e);
  }
}

TEST_CASE("a malformed PostgreSQL DSN is refused, naming the key and never the password") {
  SecretEnv env;
  auto with_dsn = [&](const std::string& dsn) {
    return config_error(replace(kValid, "dsn: host=db user=relay password=${TEST_PG_SECRET}", "dsn: \"" + dsn + "\""));
  };
  CHECK(contains(with_dsn("host=db port=notaport password=${TEST_PG_SECRET}"),
                 "relay.yaml:2: postgres.dsn: port 'notaport' is not a number from 1 to 65535"));
  CHECK(contains(with_dsn("host=db port=70000"), "postgres.dsn: port '70000' is not a number"));
  CHECK(contains(with_dsn("host=db hots=x password=${TEST_PG_SECRET}"),
                 "postgres.dsn: not a valid libpq connection string or URI: an unknown connection option (not shown"));
  for (std::string bad : {"host=db password ${TEST_PG_SECRET}", "postgresql://relay:${TEST_PG_SECRET}%zz@db/app",
                          "postgresql://relay:${TEST_PG_SECRET}@[::1/app", "host='${TEST_PG_SECRET}"}) {
    auto e = with_dsn(bad);
    CHECK_MESSAGE(contains(e, "postgres.dsn: not a valid libpq connection string or URI: "), e);
    CHECK_MESSAGE(!contains(e, "s3cr3t"), e);
  }
  CHECK(parse_config(replace(kValid, "host=db", "host=db port=5433,5434"), "relay.yaml").postgres.dsn.find("5433") !=
        std::string::npos);
}

TEST_CASE("a malformed AMQP URI is refused without showing it") {
  SecretEnv env;
  for (std::string bad : {"amqp://relay:hunter2@mq:notaport/", "amqp://relay:hunter2@mq:99999/",
                          "amqp://relay:hunter2@[::1/", "amqp://relay:hunter2@mq/a/b"}) {
    auto e = config_error(replace(kValid, "uri: amqp://relay:hunter2@mq:5672/", "uri: \"" + bad + "\""));
    CHECK_MESSAGE(contains(e, "relay.yaml:5: amqp.uri: not a valid amqp://user:password@host:port/vhost URI"), e);
    CHECK_MESSAGE(!contains(e, "hunter2"), e);
  }
}

TEST_CASE("backoff maximum below the initial delay is refused") {
  SecretEnv env;
  auto e = config_error(replace(kValid, "  batch_size: 250\n",
                                "  batch_size: 250\n  backoff_initial_ms: 5000\n  backoff_max_ms: 100\n"));
  CHECK(contains(e, "relay.backoff_max_ms: must be at least relay.backoff_initial_ms"));
}

TEST_CASE("each log.level spelling parses to its level") {
  SecretEnv env;
  const std::map<std::string, relay::LogLevel> spellings = {{"trace", relay::LogLevel::kTrace},
                                                            {"debug", relay::LogLevel::kDebug},
                                                            {"info", relay::LogLevel::kInfo},
                                                            {"warn", relay::LogLevel::kWarn},
                                                            {"error", relay::LogLevel::kError}};
  for (const auto& [text, level] : spellings) {
    CAPTURE(text);
    CHECK(parse_config(kValid + "log:\n  level: " + text + "\n", "relay.yaml").log.level == level);
  }
}

TEST_CASE("each log.format spelling parses to its format") {
  SecretEnv env;
  CHECK(parse_config(kValid + "log:\n  format: text\n", "relay.yaml").log.format == relay::LogFormat::kText);
  CHECK(parse_config(kValid + "log:\n  format: json\n", "relay.yaml").log.format == relay::LogFormat::kJson);
}

TEST_CASE("an unknown log.level or log.format is refused naming the key, the line and the value") {
  SecretEnv env;
  CHECK(config_error(kValid + "log:\n  level: loud\n") ==
        "relay.yaml:12: log.level: must be one of debug, error, info, trace, warn, got 'loud'");
  CHECK(config_error(kValid + "log:\n  format: xml\n") ==
        "relay.yaml:12: log.format: must be one of json, text, got 'xml'");
  // The spellings are exact: no other case, no spdlog synonym.
  CHECK(contains(config_error(kValid + "log:\n  level: INFO\n"), "log.level: must be one of"));
  CHECK(contains(config_error(kValid + "log:\n  level: INFO\n"), "got 'INFO'"));
  CHECK(contains(config_error(kValid + "log:\n  level: warning\n"), "got 'warning'"));
  CHECK(contains(config_error(kValid + "log:\n  level: err\n"), "got 'err'"));
  CHECK(contains(config_error(kValid + "log:\n  format: JSON\n"), "log.format: must be one of json, text, got 'JSON'"));
  CHECK(contains(config_error(kValid + "log:\n  level: [info]\n"), "log.level: must be one of"));
}

TEST_CASE("pipelining and listening settings have defaults, ranges and a type check") {
  SecretEnv env;
  auto c = parse_config(kValid, "relay.yaml");
  CHECK(c.relay.pipeline_depth == 2);
  CHECK(c.relay.listen);
  CHECK(c.relay.listen_poll_interval_ms == 5000);
  CHECK_FALSE(c.postgres.synchronous_commit);
  CHECK(parse_config(replace(kValid, "  schema: outbox\n", "  schema: outbox\n  synchronous_commit: true\n"),
                     "relay.yaml")
            .postgres.synchronous_commit);
  auto set = replace(kValid, "  batch_size: 250\n",
                     "  batch_size: 250\n  pipeline_depth: 1\n  listen: false\n  listen_poll_interval_ms: 900\n");
  c = parse_config(set, "relay.yaml");
  CHECK(c.relay.pipeline_depth == 1);
  CHECK_FALSE(c.relay.listen);
  CHECK(c.relay.listen_poll_interval_ms == 900);
  CHECK(contains(config_error(replace(kValid, "batch_size: 250", "batch_size: 250\n  pipeline_depth: 9")),
                 "relay.pipeline_depth: must be between 1 and 8, got 9"));
  CHECK(contains(config_error(replace(kValid, "batch_size: 250", "batch_size: 250\n  listen_poll_interval_ms: 5")),
                 "relay.listen_poll_interval_ms: must be between 100 and 3600000, got 5"));
  CHECK(contains(config_error(replace(kValid, "batch_size: 250", "batch_size: 250\n  listen: sometimes")),
                 "relay.listen: expected"));
}

TEST_CASE("a key given twice is an error naming the key and both lines, at the top level and in every section") {
  SecretEnv env;
  // The TLS bypass: the first copy (false) would win, and TLS would not be enforced.
  CHECK(contains(config_error("postgres:\n  dsn: host=db\n  require_tls: false\n  require_tls: true\n"
                              "amqp:\n  uri: amqp://mq/\n"),
                 "relay.yaml:4: postgres.require_tls: given twice (first at line 3)"));
  CHECK(contains(config_error(kValid + "relay:\n  batch_size: 1\n"),
                 "relay.yaml:11: relay: given twice (first at line 8)"));
  CHECK(contains(config_error(replace(kValid, "  heartbeat_s: 10\n", "  heartbeat_s: 10\n  heartbeat_s: 0\n")),
                 "relay.yaml:7: amqp.heartbeat_s: given twice (first at line 6)"));
  CHECK(contains(config_error(kValid + "  batch_size: 100\n"),
                 "relay.yaml:11: relay.batch_size: given twice (first at line 9)"));
  CHECK(contains(config_error(kValid + "log:\n  level: info\n  level: debug\n"),
                 "relay.yaml:13: log.level: given twice (first at line 12)"));
  CHECK(contains(config_error(kValid + "http:\n  listen: 127.0.0.1:0\n  listen: 0.0.0.0:9187\n"),
                 "relay.yaml:13: http.listen: given twice (first at line 12)"));
  CHECK(contains(config_error(kValid + "retention:\n  keep: 7d\n  enabled: true\n  keep: 1d\n"),
                 "relay.yaml:14: retention.keep: given twice (first at line 12)"));
  // A secret given twice is named by its key, never shown.
  auto dsn = config_error(replace(kValid, "  schema: outbox\n", "  schema: outbox\n  dsn: host=db password=hunter3\n"));
  CHECK(contains(dsn, "postgres.dsn: given twice"));
  CHECK_FALSE(contains(dsn, "hunter3"));
  CHECK_FALSE(contains(dsn, "s3cr3t-value"));
}

namespace {

// One configuration from sections of key: value, plus what every range check needs to
// stand alone: the cross-key rules (idle > confirm >= heartbeat, backoff_max >=
// backoff_initial) hold at every maximum.
std::string config_with(const std::string& section, const std::string& key, const std::string& value) {
  std::map<std::string, std::map<std::string, std::string>> c = {
      {"postgres", {{"dsn", "host=db"}, {"idle_in_transaction_timeout_ms", "86400000"}}},
      {"amqp", {{"uri", "amqp://mq/"}, {"confirm_timeout_ms", "3600000"}}},
      {"relay", {{"backoff_max_ms", "86400000"}}}};
  c[section][key] = value;
  std::string yaml;
  for (const auto& [name, keys] : c) {
    yaml += name + ":\n";
    for (const auto& [k, v] : keys) yaml += "  " + k + ": " + v + "\n";
  }
  return yaml;
}

struct Range {
  std::string key, min, max;
};

// The rows of the Ranges table in docs/CONFIGURATION.md.
std::vector<Range> documented_ranges() {
  std::ifstream in(OUTBOX_CONFIGURATION_MD);
  REQUIRE(in);
  std::vector<Range> out;
  std::string line;
  bool in_ranges = false;
  static const std::regex row(R"(\| `([a-z_]+\.[a-z_]+)` \| ([0-9.]+[smhd]?) \| ([0-9.]+[smhd]?) \|)");
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_ranges = line == "## Ranges";
    std::smatch m;
    if (in_ranges && std::regex_match(line, m, row)) out.push_back({m[1], m[2], m[3]});
  }
  return out;
}

// The next value above `max`: "3650d" -> "3651d", "100" -> "101".
std::string one_more(const std::string& max) {
  const bool unit = !std::isdigit(static_cast<unsigned char>(max.back()));
  const auto digits = unit ? max.substr(0, max.size() - 1) : max;
  return std::to_string(std::stoll(digits) + 1) + (unit ? max.substr(max.size() - 1) : "");
}

}  // namespace

TEST_CASE("every count and duration accepts its documented maximum and refuses one more") {
  const std::set<std::string> numeric_keys = {"postgres.statement_timeout_ms",
                                              "postgres.idle_in_transaction_timeout_ms",
                                              "postgres.connect_timeout_s",
                                              "postgres.keepalives_idle_s",
                                              "postgres.tcp_user_timeout_ms",
                                              "amqp.heartbeat_s",
                                              "amqp.confirm_timeout_ms",
                                              "amqp.publish_window",
                                              "amqp.publish_window_bytes",
                                              "amqp.frame_max",
                                              "relay.stall_after_s",
                                              "amqp.connect_timeout_ms",
                                              "relay.batch_size",
                                              "relay.pipeline_depth",
                                              "relay.poll_interval_ms",
                                              "relay.listen_poll_interval_ms",
                                              "relay.max_attempts",
                                              "relay.max_payload_bytes",
                                              "relay.backoff_initial_ms",
                                              "relay.backoff_max_ms",
                                              "relay.backoff_factor",
                                              "relay.summary_interval_s",
                                              "relay.lanes",
                                              "relay.rebalance_interval_ms",
                                              "http.stats_interval_s",
                                              "http.ready_max_claim_age_s",
                                              "http.live_stall_s",
                                              "http.live_max_disconnected_s",
                                              "retention.keep",
                                              "retention.batch_size",
                                              "retention.pause_ms",
                                              "retention.interval_s"};
  std::set<std::string> documented;
  for (const auto& r : documented_ranges()) {
    CAPTURE(r.key);
    documented.insert(r.key);
    const auto dot = r.key.find('.');
    const auto section = r.key.substr(0, dot), key = r.key.substr(dot + 1);
    CHECK(config_error(config_with(section, key, r.max)) == "(accepted)");
    auto e = config_error(config_with(section, key, one_more(r.max)));
    CHECK_MESSAGE(contains(e, r.key + ": must be"), e);
    CHECK_MESSAGE(contains(e, r.max), e);
  }
  CHECK(documented == numeric_keys);
}

TEST_CASE("retention.keep far beyond a timestamp's range is refused at load, not at every run") {
  auto e = config_error(config_with("retention", "keep", "999999999d"));
  CHECK(contains(e, "retention.keep: must be at most 3650d, got '999999999d'"));
  CHECK(contains(config_error(config_with("retention", "keep", "87601h")), "retention.keep: must be at most 3650d"));
  CHECK(config_error(config_with("retention", "keep", "3650d")) == "(accepted)");
}

TEST_CASE("an RFC 3339 time is accepted only when it exists") {
  for (const char* good : {"2024-05-01", "2024-05-01T10:00:00Z", "2024-05-01 10:00", "2024-02-29T23:59:59.123456+02:00",
                           "2000-02-29", "2024-12-31T00:00:00-0530", "0001-01-01"}) {
    CAPTURE(good);
    CHECK_FALSE(relay::rfc3339_problem(good));
  }
  const std::pair<const char*, const char*> bad[] = {
      {"2024-02-30T10:00:00Z", "has day 30, which month 02 of 2024 does not have"},
      {"2023-02-29", "has day 29"},
      {"1900-02-29", "has day 29"},
      {"2024-13-01", "has month 13"},
      {"2024-00-10", "has month 00"},
      {"2024-05-00", "has day 00"},
      {"2024-05-01T24:00:00Z", "has hour 24"},
      {"2024-05-01T10:60Z", "has minute 60"},
      {"2024-05-01T10:00:61Z", "has second 61"},
      {"0000-01-01", "year 0000"},
      {"2024-05-01T10:00:00+16:00", "UTC offset"},
      {"2024-5-1", "is not an RFC 3339 time"},
      {"2024-05-01T10:00:00Zjunk", "is not an RFC 3339 time"}};
  for (const auto& [text, why] : bad) {
    CAPTURE(text);
    auto problem = relay::rfc3339_problem(text);
    REQUIRE(problem);
    CHECK_MESSAGE(contains(*problem, why), *problem);
  }
}

TEST_CASE("a ${file:} password with spaces, quotes and '=' stays whole in a keyword DSN and never shows") {
  const std::string secret = "Xk9 mPq2=TOPSECRET 'q\\";
  const std::string path = "/tmp/relay_config_test_pg_password";
  std::ofstream(path) << secret << "\n";
  const auto yaml = replace(kValid, "password=${TEST_PG_SECRET}", "password=${file:" + path + "} sslmode=disable");
  auto c = parse_config(yaml, "relay.yaml");
  auto info = outbox::PgConnInfo::parse(c.postgres.dsn);
  CHECK(info.get("password") == secret);
  CHECK(info.get("sslmode") == "disable");
  // The same text inside quotes the file writes itself would end them early: refused.
  auto e = config_error(replace(kValid, "password=${TEST_PG_SECRET}", "password='${file:" + path + "}'"));
  CHECK_MESSAGE(contains(e, "relay.yaml:2: postgres.dsn: ${file:" + path + "} is inside a quoted value"), e);
  CHECK_MESSAGE(!contains(e, "TOPS"), e);
  CHECK_MESSAGE(!contains(e, "mPq2"), e);
  std::remove(path.c_str());
}

TEST_CASE("a key that is a sequence or mapping is a configuration error naming the line, not an abort") {
  SecretEnv env;
  CHECK(config_error(kValid + "? [a, b]\n: 1\n") == "relay.yaml:11: a key must be a plain name, not a sequence");
  CHECK(config_error(kValid + "? {x: 1}\n: 1\n") == "relay.yaml:11: a key must be a plain name, not a mapping");
  CHECK(config_error(replace(kValid, "  batch_size: 250\n", "  ? [a, b]\n  : 1\n")) ==
        "relay.yaml:9: relay: a key must be a plain name, not a sequence");
  CHECK(config_error(replace(kValid, "  schema: outbox\n", "  ? [a, b]\n  : 1\n")) ==
        "relay.yaml:3: postgres: a key must be a plain name, not a sequence");
}

TEST_CASE("a second YAML document is refused, naming its line, so its settings cannot be silently ignored") {
  SecretEnv env;
  CHECK(config_error(kValid + "---\npostgres:\n  require_tls: true\n") ==
        "relay.yaml:12: a second YAML document ('---' or '...' then more): the file must hold one document");
  CHECK(contains(config_error(kValid + "...\nrelay:\n  batch_size: 1\n"), "relay.yaml:12: a second YAML document"));
  // One document, with its optional start and end markers, is fine.
  CHECK(parse_config("---\n" + kValid + "...\n", "relay.yaml").relay.batch_size == 250);
}

TEST_CASE("a ${file:} that is a directory or missing is an error naming the path, not an empty secret") {
  SecretEnv env;
  for (const auto& [ref, why] : {std::pair<std::string, std::string>{"/tmp", "it is a directory, not a regular file"},
                                 {"/nonexistent/pg_password", "cannot open: No such file or directory"},
                                 {"/dev/null", "it is a character device, not a regular file"}}) {
    auto e = config_error(replace(kValid, "${TEST_PG_SECRET}", "${file:" + ref + "}"));
    CHECK_MESSAGE(e == "relay.yaml:2: postgres.dsn: cannot read secret file '" + ref + "': " + why, e);
  }
}

TEST_CASE("an integer with a leading zero or in hex or octal is refused, naming the key and value") {
  SecretEnv env;
  CHECK(contains(config_error(replace(kValid, "batch_size: 250", "batch_size: 0o17")),
                 "relay.batch_size: expected an"));
  for (const std::string bad : {"011", "0x1F", "-01", "00"}) {
    auto e = config_error(replace(kValid, "batch_size: 250", "batch_size: " + bad));
    CHECK_MESSAGE(e == "relay.yaml:9: relay.batch_size: expected a decimal integer without leading zeros, got '" + bad +
                           "'",
                  e);
  }
  CHECK(parse_config(replace(kValid, "batch_size: 250", "batch_size: 10"), "relay.yaml").relay.batch_size == 10);
  CHECK(parse_config(replace(kValid, "heartbeat_s: 10", "heartbeat_s: 0"), "relay.yaml").amqp.heartbeat_s == 0);
  CHECK(parse_config(replace(kValid, "heartbeat_s: 10", "heartbeat_s: +5"), "relay.yaml").amqp.heartbeat_s == 5);
}

TEST_CASE("a configuration file over 1 MiB is refused naming the path and the limit, and one at 1 MiB is read") {
  SecretEnv env;
  const std::string path = "/tmp/relay_config_test_large.yaml";
  auto padded = [&](std::size_t size) {
    std::string text = kValid + "# ";
    text += std::string(size - text.size() - 1, 'Z') + "\n";
    std::ofstream(path) << text;
  };
  CHECK(relay::kMaxConfigFileBytes == 1024 * 1024);
  padded(relay::kMaxConfigFileBytes);
  CHECK(load_config(path).relay.batch_size == 250);
  padded(relay::kMaxConfigFileBytes + 1);
  try {
    load_config(path);
    FAIL("a file over the limit was accepted");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()) == path + ": the configuration file is larger than 1 MiB, the most the relay reads");
  }
  std::remove(path.c_str());
}

// load_config(path) as user nobody, in a child process (the suite runs as root,
// which reads any file): the error text, or "(accepted)".
std::string load_error_as_nobody(const std::string& path) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(fds[0]);
    std::string out = "(accepted)";
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) out = "(cannot become nobody)";
    try {
      if (out == "(accepted)") load_config(path);
    } catch (const std::exception& e) {
      out = e.what();
    }
    (void)!::write(fds[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  ::waitpid(child, nullptr, 0);
  return text;
}

TEST_CASE("an unreadable configuration file says why: permission denied, no such file") {
  SecretEnv env;
  const std::string path = "/tmp/relay_config_test_private_" + std::to_string(::getpid()) + ".yaml";
  std::ofstream(path) << kValid;
  REQUIRE(::chmod(path.c_str(), 0600) == 0);  // root's, as `install -m 600` leaves it
  CHECK(load_error_as_nobody(path) == path + ": cannot read the configuration file: cannot open: Permission denied");
  std::remove(path.c_str());
  try {
    load_config(path);
    FAIL("a missing file was accepted");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()) ==
          path + ": cannot read the configuration file: cannot open: No such file or directory");
  }
}

TEST_CASE("a configuration path or ${file:} secret that is a FIFO is refused by type at once, never read") {
  const std::string path = "/tmp/relay_config_test_fifo_" + std::to_string(::getpid());
  std::remove(path.c_str());
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  // No writer ever opens it: a reader that opened it blocking would wait for good.
  std::string error = "(accepted)";
  try {
    load_config(path);
  } catch (const ConfigError& e) {
    error = e.what();
  }
  CHECK_MESSAGE(error == path + ": cannot read the configuration file: it is a FIFO, not a regular file", error);
  SecretEnv env;
  auto e = config_error(replace(kValid, "${TEST_PG_SECRET}", "${file:" + path + "}"));
  CHECK_MESSAGE(e == "relay.yaml:2: postgres.dsn: cannot read secret file '" + path +
                         "': it is a FIFO, not a regular file",
                e);
  std::remove(path.c_str());
}

TEST_CASE("a ${file:} secret over 64 KiB is refused naming the path and the limit, never the contents") {
  const std::string path = "/tmp/relay_config_test_large_secret";
  const auto yaml = replace(kValid, "${TEST_PG_SECRET}", "${file:" + path + "}");
  CHECK(relay::kMaxSecretFileBytes == 64 * 1024);
  std::ofstream(path) << std::string(relay::kMaxSecretFileBytes, 'S');
  CHECK(outbox::PgConnInfo::parse(parse_config(yaml, "relay.yaml").postgres.dsn).get("password").value_or("").size() ==
        relay::kMaxSecretFileBytes);
  std::ofstream(path) << "TOPSECRET" << std::string(relay::kMaxSecretFileBytes, 'S');
  auto e = config_error(yaml);
  CHECK_MESSAGE(e == "relay.yaml:2: postgres.dsn: secret file '" + path +
                         "' is larger than 64 KiB, the most a "
                         "${file:} reference reads",
                e);
  CHECK(!contains(e, "TOPSECRET"));
  std::remove(path.c_str());
}
