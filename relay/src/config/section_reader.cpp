#include "config/section_reader.h"

#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "config/config.h"
#include "config/spelling.h"
#include "outbox/bounded_read.h"
#include "outbox/duration.h"
#include "outbox/pg_conninfo.h"

namespace relay {
namespace {

bool plain_decimal(const std::string& text) {
  const auto digits = text.find_first_not_of("+-") == 1 ? text.substr(1) : text;
  return !digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos &&
         (digits == "0" || digits[0] != '0');
}

std::string fmt_double(double d) {
  std::ostringstream o;
  o << d;
  return o.str();
}

}  // namespace

SectionReader::SectionReader(const YAML::Node& node, std::string path, const std::string& origin,
                             std::vector<std::string>* missing)
    : node_(node), path_(std::move(path)), origin_(origin), missing_(missing) {
  reject_duplicate_keys();
}

void SectionReader::fail(const YAML::Node& at, const std::string& key, const std::string& what) const {
  std::ostringstream msg;
  msg << origin_;
  if (at.IsDefined() && at.Mark().line >= 0) msg << ":" << at.Mark().line + 1;
  msg << ": " << key << ": " << what;
  throw ConfigError(with_missing(msg.str()));
}

std::string SectionReader::with_missing(std::string message) const {
  if (missing_)
    for (const auto& m : *missing_) message += "; and " + m;
  return message;
}

void SectionReader::missing(const std::string& key, const std::string& what) const {
  if (!missing_) fail(node_, key, what);
  std::ostringstream msg;
  msg << origin_;
  if (node_.IsDefined() && node_.Mark().line >= 0) msg << ":" << node_.Mark().line + 1;
  msg << ": " << key << ": " << what;
  missing_->push_back(msg.str());
}

void SectionReader::absent(const std::string& key) {
  missing(key_path(key), "is required" + misspelling_of(key));
  // The misspelling is named in that error: finish() need not call it unknown too.
  for (const auto& kv : node_)
    if (nearest_name(kv.first.Scalar(), {key}) == key) seen_.insert(kv.first.Scalar());
}

void SectionReader::throw_missing(const std::vector<std::string>& missing) {
  if (missing.empty()) return;
  std::string message = missing.front();
  for (std::size_t i = 1; i < missing.size(); ++i) message += "; and " + missing[i];
  throw ConfigError(message);
}

void SectionReader::integer(const std::string& key, int& out, long long min, long long max) {
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

void SectionReader::real(const std::string& key, double& out, double min, double max) {
  auto v = take(key);
  if (!v) return;
  double d = 0;
  if (!v.IsScalar() || !YAML::convert<double>::decode(v, d))
    fail(v, key_path(key), "expected a number, got " + shown(v));
  if (!(d >= min && d <= max))
    fail(v, key_path(key), "must be between " + fmt_double(min) + " and " + fmt_double(max) + ", got " + v.Scalar());
  out = d;
}

void SectionReader::string(const std::string& key, std::string& out, bool required, bool secret) {
  auto v = take(key);
  if (!v) {
    if (required) absent(key);
    return;
  }
  if (!v.IsScalar()) fail(v, key_path(key), "expected a string, got a " + kind(v));
  out = expand_env(v, key_path(key), v.Scalar());
  if (required && out.empty()) fail(v, key_path(key), secret ? "must not be empty" : "must not be empty");
}

void SectionReader::conninfo(const std::string& key, std::string& out) {
  auto v = take(key);
  if (!v) return absent(key);
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

void SectionReader::string_list(const std::string& key, std::vector<std::string>& out) {
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

void SectionReader::boolean(const std::string& key, bool& out) {
  auto v = take(key);
  if (!v) return;
  if (!v.IsScalar() || !YAML::convert<bool>::decode(v, out))
    fail(v, key_path(key), "expected true or false, got " + shown(v));
}

void SectionReader::duration(const std::string& key, long long& out_s, long long min_s, long long max_s) {
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

std::string SectionReader::raw(const std::string& key) const {
  auto v = node_[key];
  return v && v.IsScalar() ? v.Scalar() : "";
}

void SectionReader::one_of(const std::string& key, std::string& out, const std::set<std::string>& allowed) {
  auto v = take(key);
  if (!v) return;
  if (!v.IsScalar() || !allowed.count(v.Scalar())) {
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    fail(v, key_path(key), "must be one of " + list + ", got " + shown(v));
  }
  out = v.Scalar();
}

void SectionReader::finish() const {
  const std::vector<std::string> known(seen_.begin(), seen_.end());
  for (const auto& kv : node_) {
    const auto& key = kv.first.Scalar();  // a plain name: the constructor checked
    if (seen_.count(key)) continue;
    const auto meant = nearest_name(key, known);
    fail(kv.first, key_path(key), "unknown key" + (meant ? " (did you mean '" + *meant + "'?)" : std::string()));
  }
}

std::string SectionReader::misspelling_of(const std::string& key) const {
  for (const auto& kv : node_) {
    const auto& given = kv.first.Scalar();
    if (nearest_name(given, {key}) != key) continue;
    return " ('" + given + "'" +
           (kv.first.Mark().line >= 0 ? " on line " + std::to_string(kv.first.Mark().line + 1) : "") +
           " is not a key: did you mean '" + key + "'?)";
  }
  return "";
}

// yaml-cpp keeps every pair of a mapping, but node[key] finds only the first: a
// second `require_tls: true` or a second `relay:` section would be silently
// ignored. So each key may appear once; the error names both lines.
// A key that is a sequence or mapping (`? [a, b]`) names no setting, and yaml-cpp
// throws when it is read as a string: refused here, before anything reads it.
void SectionReader::reject_duplicate_keys() const {
  if (!node_.IsMap()) return;
  std::map<std::string, YAML::Node> first;
  for (const auto& kv : node_) {
    if (!kv.first.IsScalar()) {
      std::ostringstream msg;
      msg << origin_;
      if (kv.first.Mark().line >= 0) msg << ":" << kv.first.Mark().line + 1;
      msg << ": " << (path_.empty() ? "" : path_ + ": ") << "a key must be a plain name, not a "
          << (kv.first.IsNull() ? "null" : kind(kv.first));
      throw ConfigError(with_missing(msg.str()));
    }
    auto [it, fresh] = first.emplace(kv.first.Scalar(), kv.first);
    if (fresh) continue;
    const auto& before = it->second.Mark();
    fail(kv.first, key_path(kv.first.Scalar()),
         "given twice (first at line " + std::to_string(before.line + 1) + "); each key may appear once");
  }
}

YAML::Node SectionReader::take(const std::string& key) {
  seen_.insert(key);
  auto v = node_[key];
  if (v && v.IsNull()) fail(v, key_path(key), "has no value");
  return v;
}

std::string SectionReader::expand_env(const YAML::Node& at, const std::string& key, const std::string& raw) const {
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

std::string SectionReader::reference_value(const YAML::Node& at, const std::string& key,
                                           const std::string& name) const {
  if (name.rfind("file:", 0) == 0) return read_secret_file(at, key, name.substr(5));
  const char* val = std::getenv(name.c_str());
  if (name.empty() || !val) fail(at, key, "environment variable '" + name + "' is not set");
  return val;
}

// ${file:PATH}: a mounted secret (Kubernetes Secret, systemd credential). The
// path may be named in messages; the contents never are.
std::string SectionReader::read_secret_file(const YAML::Node& at, const std::string& key,
                                            const std::string& path) const {
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

std::string SectionReader::shown(const YAML::Node& v) {
  if (!v.IsScalar()) return "a " + kind(v);
  auto s = v.Scalar();
  return "'" + (s.size() > 64 ? s.substr(0, 64) + "..." : s) + "'";
}

std::string SectionReader::kind(const YAML::Node& v) {
  return v.IsMap() ? "mapping" : v.IsSequence() ? "sequence" : "scalar";
}

}  // namespace relay
