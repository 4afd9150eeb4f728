#include "config/config.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "config/endpoint_syntax.h"
#include "config/section_reader.h"
#include "config/spelling.h"
#include "config/tls_policy.h"
#include "outbox/amqp_wire.h"
#include "outbox/bounded_read.h"
#include "outbox/duration.h"
#include "outbox/errors.h"
#include "outbox/pg_conninfo.h"
#include "outbox/pg_dsn_check.h"
#include "outbox/sql_identifier.h"

namespace relay {
namespace {

YAML::Node section(SectionReader& root, const std::string& key, bool required) {
  auto v = root.node()[key];
  if (!v) {
    if (required) root.fail(root.node(), key, "section is required" + root.misspelling_of(key));
    return YAML::Node(YAML::NodeType::Map);
  }
  if (!v.IsMap()) root.fail(v, key, "expected a mapping of settings");
  return v;
}

// The password written in a connection string (URI userinfo, ?password= or the
// password keyword), or "" when there is none. Pure; for the inline-secret check.
std::string password_in(const std::string& dsn) {
  auto scheme = dsn.find("://");
  if (scheme != std::string::npos) {
    auto at = dsn.find('@', scheme + 3);
    auto slash = dsn.find('/', scheme + 3);
    if (at != std::string::npos && (slash == std::string::npos || at < slash)) {
      auto colon = dsn.find(':', scheme + 3);
      if (colon != std::string::npos && colon < at) return dsn.substr(colon + 1, at - colon - 1);
    }
    auto q = dsn.find("password=");
    if (q != std::string::npos && (dsn[q - 1] == '?' || dsn[q - 1] == '&'))
      return dsn.substr(q + 9, dsn.find('&', q) - q - 9);
    return "";
  }
  for (std::size_t q = dsn.find("password"); q != std::string::npos; q = dsn.find("password", q + 1)) {
    if (q > 0 && !std::isspace(static_cast<unsigned char>(dsn[q - 1]))) continue;
    auto eq = dsn.find_first_not_of(" \t", q + 8);
    if (eq == std::string::npos || dsn[eq] != '=') continue;
    auto v = dsn.find_first_not_of(" \t", eq + 1);
    if (v == std::string::npos) return "";
    return dsn.substr(v, dsn.find_first_of(" \t", v) - v);
  }
  return "";
}

// Warns when a connection string holds a password that is not a ${...} reference.
void warn_inline_password(SectionReader& r, const std::string& key, std::vector<std::string>& warnings,
                          const std::string& origin) {
  auto password = password_in(r.raw(key));
  if (password.empty() || password.find("${") != std::string::npos) return;
  auto v = r.node()[key];
  warnings.push_back(origin + ":" + std::to_string(v.Mark().line + 1) + ": " + r.key_path(key) +
                     ": a password is written inline; move it to ${ENV_VAR} or ${file:PATH}");
}

// The sslmode libpq will use for `dsn` (its last sslmode, else PGSSLMODE), or
// nullopt when the DSN does not parse (its syntax error is reported last).
std::optional<std::string> sslmode_of(const std::string& dsn) {
  try {
    return TlsPolicy::pg_sslmode(outbox::PgConnInfo::parse(dsn), std::getenv("PGSSLMODE"));
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

void read_postgres(const YAML::Node& n, const std::string& origin, std::vector<std::string>* missing, PostgresConfig& c,
                   std::vector<std::string>& warnings) {
  SectionReader r(n, "postgres", origin, missing);
  r.conninfo("dsn", c.dsn);
  r.string("schema", c.schema, false);
  try {
    outbox::quoted_identifier(c.schema, "postgres.schema");
  } catch (const outbox::ValidationError& e) {
    r.fail(n["schema"], "postgres.schema", e.detail());
  }
  r.integer("statement_timeout_ms", c.statement_timeout_ms, 100, 3600000);
  r.integer("idle_in_transaction_timeout_ms", c.idle_in_transaction_timeout_ms, 1000, 86400000);
  r.integer("connect_timeout_s", c.connect_timeout_s, 1, 3600);
  r.integer("keepalives_idle_s", c.keepalives_idle_s, 1, 7200);
  r.integer("tcp_user_timeout_ms", c.tcp_user_timeout_ms, 0, 3600000);
  r.boolean("require_tls", c.require_tls);
  r.boolean("synchronous_commit", c.synchronous_commit);
  r.finish();
  warn_inline_password(r, "dsn", warnings, origin);
  const auto mode = sslmode_of(c.dsn);
  if (c.require_tls && mode)
    if (auto why = TlsPolicy::pg_refusal(*mode)) r.fail(n["require_tls"], "postgres.require_tls", *why);
}

// amqp.uri or amqp.uris (exactly one), each URI amqp:// or amqps://, all the same.
void read_amqp_endpoints(SectionReader& r, const YAML::Node& n, AmqpConfig& c) {
  if (n["uri"] && n["uris"])
    r.fail(n["uris"], "amqp.uris", "amqp.uri and amqp.uris are both given: use uri for one node or uris for a list");
  if (!n["uris"]) {
    r.string("uri", c.uri, true, true);
    if (n["uri"] && c.uri.rfind("amqp://", 0) != 0 && c.uri.rfind("amqps://", 0) != 0)
      r.fail(n["uri"], "amqp.uri", "must start with amqp:// or amqps://");
  } else {
    r.string_list("uris", c.uris);
    c.uri = c.uris.front();
    for (std::size_t i = 0; i < c.uris.size(); ++i) {
      const std::string key = "amqp.uris[" + std::to_string(i) + "]";
      const auto& u = c.uris[i];
      if (u.rfind("amqp://", 0) != 0 && u.rfind("amqps://", 0) != 0)
        r.fail(n["uris"][i], key, "must start with amqp:// or amqps://");
      if ((u.rfind("amqps://", 0) == 0) != (c.uri.rfind("amqps://", 0) == 0))
        r.fail(n["uris"][i], key, "mixes amqp:// and amqps:// with amqp.uris[0]: every node must use the same scheme");
    }
  }
  r.one_of("endpoint_order", c.endpoint_order,
           std::map<std::string, outbox::amqp::EndpointOrder>{{"in_order", outbox::amqp::EndpointOrder::kInOrder},
                                                              {"shuffled", outbox::amqp::EndpointOrder::kShuffled}});
}

void read_amqp(const YAML::Node& n, const std::string& origin, std::vector<std::string>* missing, AmqpConfig& c,
               std::vector<std::string>& warnings) {
  SectionReader r(n, "amqp", origin, missing);
  read_amqp_endpoints(r, n, c);
  r.integer("heartbeat_s", c.heartbeat_s, 0, 3600);
  r.integer("confirm_timeout_ms", c.confirm_timeout_ms, 100, 3600000);
  r.integer("publish_window", c.publish_window, 1, 65535);
  r.integer("publish_window_bytes", c.publish_window_bytes, 1048576, 1073741824);
  r.integer("frame_max", c.frame_max, static_cast<long long>(outbox::kMinFrameMax), 1048576);
  r.integer("connect_timeout_ms", c.connect_timeout_ms, 100, 600000);
  r.boolean("require_tls", c.require_tls);
  r.string("ca_file", c.ca_file, false);
  r.string("cert_file", c.cert_file, false);
  r.string("key_file", c.key_file, false);
  r.boolean("verify_hostname", c.verify_hostname);
  r.boolean("send_row_id", c.send_row_id);
  r.boolean("send_sequence", c.send_sequence);
  r.boolean("send_type", c.send_type);
  r.boolean("send_timestamp", c.send_timestamp);
  r.string("alternate_exchange", c.alternate_exchange, false);
  r.finish();
  if (c.uris.empty()) warn_inline_password(r, "uri", warnings, origin);
  for (std::size_t i = 0; i < c.uris.size(); ++i) {
    auto item = n["uris"][i];
    auto password = password_in(item.Scalar());
    if (!password.empty() && password.find("${") == std::string::npos)
      warnings.push_back(origin + ":" + std::to_string(item.Mark().line + 1) + ": amqp.uris[" + std::to_string(i) +
                         "]: a password is written inline; move it to ${ENV_VAR} or ${file:PATH}");
  }
  const bool tls = c.uri.rfind("amqps://", 0) == 0;
  std::string tls_key;
  if (c.require_tls)
    if (auto why = TlsPolicy::amqp_refusal(c, tls_key)) r.fail(n[tls_key.substr(5)], tls_key, *why);
  if (!tls && (!c.ca_file.empty() || !c.cert_file.empty() || !c.key_file.empty()))
    r.fail(n[c.uris.empty() ? "uri" : "uris"], c.uris.empty() ? "amqp.uri" : "amqp.uris",
           "ca_file, cert_file and key_file need an amqps:// URI");
  if (c.cert_file.empty() != c.key_file.empty())
    r.fail(n[c.cert_file.empty() ? "key_file" : "cert_file"], "amqp.cert_file", "cert_file and key_file go together");
  const std::pair<const char*, const std::string*> files[] = {
      {"ca_file", &c.ca_file}, {"cert_file", &c.cert_file}, {"key_file", &c.key_file}};
  for (const auto& [key, path] : files)
    if (!path->empty())
      if (const auto probe = outbox::probe_regular_file(*path); !probe.ok())
        r.fail(n[key], r.key_path(key), "cannot read '" + *path + "': " + probe.why(0));
  if (c.alternate_exchange.size() > 255)
    r.fail(n["alternate_exchange"], "amqp.alternate_exchange",
           "is " + std::to_string(c.alternate_exchange.size()) + " bytes, an AMQP exchange name holds at most 255");
  if (c.heartbeat_s > 0 && c.confirm_timeout_ms < c.heartbeat_s * 1000)
    r.fail(n["confirm_timeout_ms"], "amqp.confirm_timeout_ms",
           "must be at least amqp.heartbeat_s (" + std::to_string(c.heartbeat_s) + " s), got " +
               std::to_string(c.confirm_timeout_ms) + " ms");
}

void read_relay(const YAML::Node& n, const std::string& origin, std::vector<std::string>* missing, RelaySettings& c) {
  SectionReader r(n, "relay", origin, missing);
  r.integer("batch_size", c.batch_size, 1, 100000);
  r.integer("pipeline_depth", c.pipeline_depth, 1, 8);
  r.integer("poll_interval_ms", c.poll_interval_ms, 1, 3600000);
  r.boolean("listen", c.listen);
  r.integer("listen_poll_interval_ms", c.listen_poll_interval_ms, 100, 3600000);
  r.integer("max_attempts", c.max_attempts, 1, 1000000);
  r.integer("max_payload_bytes", c.max_payload_bytes, 1024, 128 * 1024 * 1024);
  r.integer("backoff_initial_ms", c.backoff_initial_ms, 1, 86400000);
  r.integer("backoff_max_ms", c.backoff_max_ms, 1, 86400000);
  r.real("backoff_factor", c.backoff_factor, 1.0, 100.0);
  r.integer("summary_interval_s", c.summary_interval_s, 1, 86400);
  r.one_of("ordering", c.ordering,
           std::map<std::string, Ordering>{{"unordered", Ordering::kUnordered}, {"per_key", Ordering::kPerKey}});
  r.integer("lanes", c.lanes, 1, 4096);
  r.integer("rebalance_interval_ms", c.rebalance_interval_ms, 100, 600000);
  r.one_of("key_failure_policy", c.key_failure_policy,
           std::map<std::string, KeyFailurePolicy>{{"park_key", KeyFailurePolicy::kParkKey},
                                                   {"park_message", KeyFailurePolicy::kParkMessage}});
  r.integer("stall_after_s", c.stall_after_s, 1, 86400);
  r.one_of("on_publish", c.on_publish,
           std::map<std::string, OnPublish>{{"mark", OnPublish::kMark}, {"delete", OnPublish::kDelete}});
  r.finish();
  if (c.backoff_max_ms < c.backoff_initial_ms)
    r.fail(n["backoff_max_ms"], "relay.backoff_max_ms",
           "must be at least relay.backoff_initial_ms (" + std::to_string(c.backoff_initial_ms) + "), got " +
               std::to_string(c.backoff_max_ms));
}

void read_http(const YAML::Node& n, const std::string& origin, std::vector<std::string>* missing, HttpConfig& c) {
  SectionReader r(n, "http", origin, missing);
  r.string("listen", c.listen, false);
  if (!c.listen.empty()) {
    try {
      parse_listen_address(c.listen);
    } catch (const std::invalid_argument& e) {
      r.fail(n["listen"], "http.listen", e.what());
    }
  }
  r.integer("stats_interval_s", c.stats_interval_s, 1, 3600);
  r.integer("ready_max_claim_age_s", c.ready_max_claim_age_s, 1, 86400);
  r.integer("live_stall_s", c.live_stall_s, 10, 86400);
  r.integer("live_max_disconnected_s", c.live_max_disconnected_s, 0, 86400);
  r.finish();
}

void read_retention(const YAML::Node& n, const std::string& origin, std::vector<std::string>* missing,
                    RetentionConfig& c) {
  SectionReader r(n, "retention", origin, missing);
  r.boolean("enabled", c.enabled);
  // A floor of one minute keeps retention clear of rows a batch is marking right now.
  r.duration("keep", c.keep_s, 60, outbox::kMaxAge.count());
  r.integer("batch_size", c.batch_size, 1, 1000000);
  r.integer("pause_ms", c.pause_ms, 0, 60000);
  r.integer("interval_s", c.interval_s, 1, 86400);
  r.finish();
}

void read_log(const YAML::Node& n, const std::string& origin, std::vector<std::string>* missing, LogConfig& c) {
  SectionReader r(n, "log", origin, missing);
  r.one_of("level", c.level,
           std::map<std::string, LogLevel>{{"trace", LogLevel::kTrace},
                                           {"debug", LogLevel::kDebug},
                                           {"info", LogLevel::kInfo},
                                           {"warn", LogLevel::kWarn},
                                           {"error", LogLevel::kError}});
  r.one_of("format", c.format,
           std::map<std::string, LogFormat>{{"text", LogFormat::kText}, {"json", LogFormat::kJson}});
  r.finish();
}

// yaml-cpp reads one document, so a second one ('---', or '...' then more) would
// be ignored: its settings (a `require_tls: true`) would silently not apply.
std::string second_document(const std::string& text, const YAML::Node& second, const std::string& origin) {
  int line = second.Mark().line;
  if (line < 0) {  // an empty document has no mark: the last line starting '---' or '...'
    int n = 0;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l); ++n)
      if (l.rfind("---", 0) == 0 || l.rfind("...", 0) == 0) line = n;
  }
  return origin + (line >= 0 ? ":" + std::to_string(line + 1) : "") +
         ": a second YAML document ('---' or '...' then more): the file must hold one document";
}

RelayConfig read_config(const YAML::Node& root, const std::string& origin) {
  if (!root || root.IsNull()) throw ConfigError(origin + ": the file is empty");
  if (!root.IsMap()) throw ConfigError(origin + ": the top level must be a mapping of sections");

  RelayConfig c;
  std::vector<std::string> missing;  // required keys not given: see SectionReader
  SectionReader top(root, "", origin, &missing);
  read_postgres(section(top, "postgres", true), origin, &missing, c.postgres, c.warnings);
  read_amqp(section(top, "amqp", true), origin, &missing, c.amqp, c.warnings);
  read_relay(section(top, "relay", false), origin, &missing, c.relay);
  read_log(section(top, "log", false), origin, &missing, c.log);
  read_http(section(top, "http", false), origin, &missing, c.http);
  read_retention(section(top, "retention", false), origin, &missing, c.retention);
  static const std::set<std::string> kSections = {"postgres", "amqp", "relay", "log", "http", "retention"};
  for (const auto& kv : root) {
    const auto& key = kv.first.Scalar();  // a plain name: SectionReader checked
    if (kSections.count(key)) continue;
    const auto meant = nearest_name(key, {kSections.begin(), kSections.end()});
    top.fail(kv.first, key,
             meant ? "unknown section (did you mean '" + *meant + "'?)"
                   : "unknown section (expected postgres, amqp, relay, log, http, retention)");
  }
  SectionReader::throw_missing(missing);  // the checks below read the required keys
  if (c.postgres.idle_in_transaction_timeout_ms <= c.amqp.confirm_timeout_ms)
    top.fail(root["postgres"]["idle_in_transaction_timeout_ms"], "postgres.idle_in_transaction_timeout_ms",
             "must exceed amqp.confirm_timeout_ms (" + std::to_string(c.amqp.confirm_timeout_ms) +
                 " ms): the claim transaction stays open while confirms are awaited");
  // Last, so that other keys' errors come first. Syntax only: whether the servers
  // answer is known when connecting (`run` waits for them, `check-config --connect`
  // does not).
  if (auto why = outbox::pg_dsn_syntax_error(c.postgres.dsn)) top.fail(root["postgres"]["dsn"], "postgres.dsn", *why);
  if (c.amqp.uris.empty()) {
    if (auto why = amqp_uri_syntax_error(c.amqp.uri)) top.fail(root["amqp"]["uri"], "amqp.uri", *why);
  }
  for (std::size_t i = 0; i < c.amqp.uris.size(); ++i)
    if (auto why = amqp_uri_syntax_error(c.amqp.uris[i]))
      top.fail(root["amqp"]["uris"][i], "amqp.uris[" + std::to_string(i) + "]", *why);
  const auto mode = sslmode_of(c.postgres.dsn).value_or("prefer");
  if (auto w = TlsPolicy::unverified_warning(TlsPolicy::pg_verified(mode), mode, c.amqp))
    c.warnings.push_back(origin + ": " + *w);
  return c;
}

}  // namespace

RelayConfig parse_config(const std::string& yaml_text, const std::string& origin) {
  // Every exception of yaml-cpp is a configuration error (exit 2), never an abort.
  auto refuse = [&](const YAML::Exception& e, const std::string& what) -> ConfigError {
    return ConfigError(origin + (e.mark.line >= 0 ? ":" + std::to_string(e.mark.line + 1) : "") + ": " + what + e.msg);
  };
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(yaml_text);
  } catch (const YAML::Exception& e) {
    throw refuse(e, "malformed YAML: ");
  }
  if (documents.size() > 1) throw ConfigError(second_document(yaml_text, documents[1], origin));
  try {
    return read_config(documents.empty() ? YAML::Node() : documents[0], origin);
  } catch (const YAML::Exception& e) {
    throw refuse(e, "cannot read this YAML: ");
  }
}

RelayConfig load_config(const std::string& path) {
  auto read = outbox::read_bounded(path, kMaxConfigFileBytes);
  if (read.status == outbox::BoundedRead::Status::kTooLarge)
    throw ConfigError(path + ": the configuration file is larger than " + outbox::size_text(kMaxConfigFileBytes) +
                      ", the most the relay reads");
  if (!read.ok()) throw ConfigError(path + ": cannot read the configuration file: " + read.why(kMaxConfigFileBytes));
  return parse_config(read.text, path);
}

}  // namespace relay
