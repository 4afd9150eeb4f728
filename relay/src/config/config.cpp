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

// Reads one mapping, remembering which keys it consumed so that finish() can
// reject the rest as unknown. A key given twice is refused at construction.
class SectionReader {
 public:
  SectionReader(const YAML::Node& node, std::string path, const std::string& origin)
      : node_(node), path_(std::move(path)), origin_(origin) {
    reject_duplicate_keys();
  }

  [[noreturn]] void fail(const YAML::Node& at, const std::string& key, const std::string& what) const {
    std::ostringstream msg;
    msg << origin_;
    if (at.IsDefined() && at.Mark().line >= 0) msg << ":" << at.Mark().line + 1;
    msg << ": " << key << ": " << what;
    throw ConfigError(msg.str());
  }

  std::string key_path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  void integer(const std::string& key, int& out, long long min, long long max) {
    auto v = take(key);
    if (!v) return;
    long long n = 0;
    if (!v.IsScalar() || !YAML::convert<long long>::decode(v, n))
      fail(v, key_path(key), "expected an integer, got " + shown(v));
    // yaml-cpp reads 011 as octal (9) and 0x1F as hex: only plain decimal is taken.
    if (!plain_decimal(v.Scalar()))
      fail(v, key_path(key), "expected a decimal integer without leading zeros, got " + shown(v));
    if (n < min || n > max)
      fail(v, key_path(key),
           "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " + std::to_string(n));
    out = static_cast<int>(n);
  }

  void real(const std::string& key, double& out, double min, double max) {
    auto v = take(key);
    if (!v) return;
    double d = 0;
    if (!v.IsScalar() || !YAML::convert<double>::decode(v, d))
      fail(v, key_path(key), "expected a number, got " + shown(v));
    if (!(d >= min && d <= max))
      fail(v, key_path(key), "must be between " + fmt_double(min) + " and " + fmt_double(max) + ", got " + v.Scalar());
    out = d;
  }

  // `secret`: the value (and what ${ENV} expanded to) never appears in a message.
  void string(const std::string& key, std::string& out, bool required, bool secret = false) {
    auto v = take(key);
    if (!v) {
      if (required) fail(node_, key_path(key), "is required" + misspelling_of(key));
      return;
    }
    if (!v.IsScalar()) fail(v, key_path(key), "expected a string, got a " + kind(v));
    out = expand_env(v, key_path(key), v.Scalar());
    if (required && out.empty()) fail(v, key_path(key), secret ? "must not be empty" : "must not be empty");
  }

  // A libpq connection string (required, secret), its ${...} references expanded
  // so that a secret with spaces or quotes cannot split it (expand_conninfo_template).
  void conninfo(const std::string& key, std::string& out) {
    auto v = take(key);
    if (!v) fail(node_, key_path(key), "is required" + misspelling_of(key));
    if (!v.IsScalar()) fail(v, key_path(key), "expected a string, got a " + kind(v));
    try {
      out = outbox::expand_conninfo_template(v.Scalar(), [&](const std::string& name) {
        return reference_value(v, key_path(key), name);
      });
    } catch (const std::invalid_argument& e) {
      fail(v, key_path(key), e.what());
    }
    if (out.empty()) fail(v, key_path(key), "must not be empty");
  }

  // A non-empty sequence of non-empty strings, ${...} expanded; each item a secret.
  void string_list(const std::string& key, std::vector<std::string>& out) {
    auto v = take(key);
    if (!v) return;
    // Each item is a secret, so is a scalar written where the list belongs (a URI
    // with its password): it is described, never shown.
    if (!v.IsSequence() || v.size() == 0)
      fail(v, key_path(key),
           "expected a non-empty list of strings, got " +
               (v.IsSequence() ? std::string("an empty list")
                : v.IsScalar() ? "a single value (not shown: it may hold a password); write "
                                 "it as a list item ('- VALUE') or use the one-value key"
                               : "a " + kind(v)));
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::string item_key = key_path(key) + "[" + std::to_string(i) + "]";
      if (!v[i].IsScalar()) fail(v[i], item_key, "expected a string, got a " + kind(v[i]));
      out.push_back(expand_env(v[i], item_key, v[i].Scalar()));
      if (out.back().empty()) fail(v[i], item_key, "must not be empty");
    }
  }

  void boolean(const std::string& key, bool& out) {
    auto v = take(key);
    if (!v) return;
    if (!v.IsScalar() || !YAML::convert<bool>::decode(v, out))
      fail(v, key_path(key), "expected true or false, got " + shown(v));
  }

  // A duration such as "7d" or "12h", stored in seconds, in [min_s, max_s].
  void duration(const std::string& key, long long& out_s, long long min_s, long long max_s) {
    auto v = take(key);
    if (!v) return;
    if (!v.IsScalar()) fail(v, key_path(key), "expected a duration such as 7d, got " + shown(v));
    try {
      out_s = outbox::parse_duration(v.Scalar()).count();
    } catch (const std::invalid_argument& e) {
      fail(v, key_path(key), e.what());
    }
    if (out_s < min_s)
      fail(v, key_path(key),
           "must be at least " + outbox::format_duration(std::chrono::seconds(min_s)) + ", got " + shown(v));
    if (out_s > max_s)
      fail(v, key_path(key),
           "must be at most " + outbox::format_duration(std::chrono::seconds(max_s)) + ", got " + shown(v));
  }

  // The raw YAML text of a string value, before ${...} expansion ("" when absent).
  std::string raw(const std::string& key) const {
    auto v = node_[key];
    return v && v.IsScalar() ? v.Scalar() : "";
  }

  void one_of(const std::string& key, std::string& out, const std::set<std::string>& allowed) {
    auto v = take(key);
    if (!v) return;
    if (!v.IsScalar() || !allowed.count(v.Scalar())) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      fail(v, key_path(key), "must be one of " + list + ", got " + shown(v));
    }
    out = v.Scalar();
  }

  // An enum setting: one of the names in `names`, stored as its value.
  template <class Enum>
  void one_of(const std::string& key, Enum& out, const std::map<std::string, Enum>& names) {
    std::set<std::string> allowed;
    for (const auto& [name, value] : names) allowed.insert(name);
    std::string text;
    one_of(key, text, allowed);
    if (!text.empty()) out = names.at(text);
  }

  void finish() const {
    const std::vector<std::string> known(seen_.begin(), seen_.end());
    for (const auto& kv : node_) {
      const auto& key = kv.first.Scalar();  // a plain name: the constructor checked
      if (seen_.count(key)) continue;
      const auto meant = nearest_name(key, known);
      fail(kv.first, key_path(key), "unknown key" + (meant ? " (did you mean '" + *meant + "'?)" : std::string()));
    }
  }

  // For a required `key` that is missing: the key given instead that is probably it
  // misspelled (" ('dns' on line 3 is not a key: did you mean 'dsn'?)"), or "".
  std::string misspelling_of(const std::string& key) const {
    for (const auto& kv : node_) {
      const auto& given = kv.first.Scalar();
      if (nearest_name(given, {key}) != key) continue;
      return " ('" + given + "'" +
             (kv.first.Mark().line >= 0 ? " on line " + std::to_string(kv.first.Mark().line + 1) : "") +
             " is not a key: did you mean '" + key + "'?)";
    }
    return "";
  }

  const YAML::Node& node() const { return node_; }

 private:
  // yaml-cpp keeps every pair of a mapping, but node[key] finds only the first: a
  // second `require_tls: true` or a second `relay:` section would be silently
  // ignored. So each key may appear once; the error names both lines.
  // A key that is a sequence or mapping (`? [a, b]`) names no setting, and yaml-cpp
  // throws when it is read as a string: refused here, before anything reads it.
  void reject_duplicate_keys() const {
    if (!node_.IsMap()) return;
    std::map<std::string, YAML::Node> first;
    for (const auto& kv : node_) {
      if (!kv.first.IsScalar()) {
        std::ostringstream msg;
        msg << origin_;
        if (kv.first.Mark().line >= 0) msg << ":" << kv.first.Mark().line + 1;
        msg << ": " << (path_.empty() ? "" : path_ + ": ") << "a key must be a plain name, not a "
            << (kv.first.IsNull() ? "null" : kind(kv.first));
        throw ConfigError(msg.str());
      }
      auto [it, fresh] = first.emplace(kv.first.Scalar(), kv.first);
      if (fresh) continue;
      const auto& before = it->second.Mark();
      fail(kv.first, key_path(kv.first.Scalar()),
           "given twice (first at line " + std::to_string(before.line + 1) + "); each key may appear once");
    }
  }

  YAML::Node take(const std::string& key) {
    seen_.insert(key);
    auto v = node_[key];
    if (v && v.IsNull()) fail(v, key_path(key), "has no value");
    return v;
  }

  std::string expand_env(const YAML::Node& at, const std::string& key, const std::string& raw) const {
    std::string out;
    for (std::size_t i = 0; i < raw.size();) {
      if (raw.compare(i, 2, "${") == 0) {
        auto end = raw.find('}', i + 2);
        if (end == std::string::npos) fail(at, key, "unterminated ${ in value");
        out += reference_value(at, key, raw.substr(i + 2, end - i - 2));
        i = end + 1;
      } else {
        out += raw[i++];
      }
    }
    return out;
  }

  // The text of ${NAME}: the environment variable NAME, or the file of ${file:PATH}.
  std::string reference_value(const YAML::Node& at, const std::string& key, const std::string& name) const {
    if (name.rfind("file:", 0) == 0) return read_secret_file(at, key, name.substr(5));
    const char* val = std::getenv(name.c_str());
    if (name.empty() || !val) fail(at, key, "environment variable '" + name + "' is not set");
    return val;
  }

  // ${file:PATH}: a mounted secret (Kubernetes Secret, systemd credential). The
  // path may be named in messages; the contents never are.
  std::string read_secret_file(const YAML::Node& at, const std::string& key, const std::string& path) const {
    if (path.empty()) fail(at, key, "${file:} needs a path");
    // A directory opens, and reads as nothing: an empty password. The shared reader
    // refuses it, and a FIFO or device, by type before reading.
    auto read = outbox::read_bounded(path, kMaxSecretFileBytes);
    if (read.status == outbox::BoundedRead::Status::kTooLarge)
      fail(at, key,
           "secret file '" + path + "' is larger than " + outbox::size_text(kMaxSecretFileBytes) +
               ", the most a ${file:} reference reads");
    if (!read.ok()) fail(at, key, "cannot read secret file '" + path + "': " + read.why(kMaxSecretFileBytes));
    auto& text = read.text;
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    return text;
  }

  static bool plain_decimal(const std::string& text) {
    const auto digits = text.find_first_not_of("+-") == 1 ? text.substr(1) : text;
    return !digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos &&
           (digits == "0" || digits[0] != '0');
  }

  static std::string kind(const YAML::Node& v) {
    return v.IsMap() ? "mapping" : v.IsSequence() ? "sequence" : "scalar";
  }
  static std::string shown(const YAML::Node& v) {
    if (!v.IsScalar()) return "a " + kind(v);
    auto s = v.Scalar();
    return "'" + (s.size() > 64 ? s.substr(0, 64) + "..." : s) + "'";
  }
  static std::string fmt_double(double d) {
    std::ostringstream o;
    o << d;
    return o.str();
  }

  YAML::Node node_;
  std::string path_;
  const std::string& origin_;
  std::set<std::string> seen_;
};

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

void read_postgres(const YAML::Node& n, const std::string& origin, PostgresConfig& c,
                   std::vector<std::string>& warnings) {
  SectionReader r(n, "postgres", origin);
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
    if (c.uri.rfind("amqp://", 0) != 0 && c.uri.rfind("amqps://", 0) != 0)
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

void read_amqp(const YAML::Node& n, const std::string& origin, AmqpConfig& c, std::vector<std::string>& warnings) {
  SectionReader r(n, "amqp", origin);
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

void read_relay(const YAML::Node& n, const std::string& origin, RelaySettings& c) {
  SectionReader r(n, "relay", origin);
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

void read_http(const YAML::Node& n, const std::string& origin, HttpConfig& c) {
  SectionReader r(n, "http", origin);
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

void read_retention(const YAML::Node& n, const std::string& origin, RetentionConfig& c) {
  SectionReader r(n, "retention", origin);
  r.boolean("enabled", c.enabled);
  // A floor of one minute keeps retention clear of rows a batch is marking right now.
  r.duration("keep", c.keep_s, 60, outbox::kMaxAge.count());
  r.integer("batch_size", c.batch_size, 1, 1000000);
  r.integer("pause_ms", c.pause_ms, 0, 60000);
  r.integer("interval_s", c.interval_s, 1, 86400);
  r.finish();
}

void read_log(const YAML::Node& n, const std::string& origin, LogConfig& c) {
  SectionReader r(n, "log", origin);
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
  SectionReader top(root, "", origin);
  read_postgres(section(top, "postgres", true), origin, c.postgres, c.warnings);
  read_amqp(section(top, "amqp", true), origin, c.amqp, c.warnings);
  read_relay(section(top, "relay", false), origin, c.relay);
  read_log(section(top, "log", false), origin, c.log);
  read_http(section(top, "http", false), origin, c.http);
  read_retention(section(top, "retention", false), origin, c.retention);
  static const std::set<std::string> kSections = {"postgres", "amqp", "relay", "log", "http", "retention"};
  for (const auto& kv : root) {
    const auto& key = kv.first.Scalar();  // a plain name: SectionReader checked
    if (kSections.count(key)) continue;
    const auto meant = nearest_name(key, {kSections.begin(), kSections.end()});
    top.fail(kv.first, key,
             meant ? "unknown section (did you mean '" + *meant + "'?)"
                   : "unknown section (expected postgres, amqp, relay, log, http, retention)");
  }
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
