#pragma once
// SectionReader: reads one mapping of the relay's YAML configuration.

#include <yaml-cpp/yaml.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace relay {

// Reads one mapping, remembering which keys it consumed so that finish() can
// reject the rest as unknown. A key given twice is refused at construction.
// Every error is a ConfigError naming the file, line and key path; a secret value
// (`secret` strings, ${...} expansions, list items) never appears in one.
//
// A missing required key is not thrown at once when `missing` is given: it is
// gathered there, and every later error carries the gathered ones after it ("; and ...", one line). So
// an unknown key elsewhere (often the required key misspelled) is reported with
// the missing one instead of hidden behind it; the caller throws what is left
// with throw_missing(). Not thread-safe; lives for one parse.
class SectionReader {
 public:
  SectionReader(const YAML::Node& node, std::string path, const std::string& origin,
                std::vector<std::string>* missing = nullptr);

  [[noreturn]] void fail(const YAML::Node& at, const std::string& key, const std::string& what) const;
  // The error for a missing required `key` (gathered, or thrown when not gathering).
  void missing(const std::string& key, const std::string& what) const;
  // Throws the first gathered missing key, the others after it. REQUIRES: `missing`.
  static void throw_missing(const std::vector<std::string>& missing);

  std::string key_path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  void integer(const std::string& key, int& out, long long min, long long max);
  void real(const std::string& key, double& out, double min, double max);
  // `secret`: the value (and what ${ENV} expanded to) never appears in a message.
  void string(const std::string& key, std::string& out, bool required, bool secret = false);
  // A libpq connection string (required, secret), its ${...} references expanded
  // so that a secret with spaces or quotes cannot split it (expand_conninfo_template).
  void conninfo(const std::string& key, std::string& out);
  // A non-empty sequence of non-empty strings, ${...} expanded; each item a secret.
  void string_list(const std::string& key, std::vector<std::string>& out);
  void boolean(const std::string& key, bool& out);
  // A duration such as "7d" or "12h", stored in seconds, in [min_s, max_s].
  void duration(const std::string& key, long long& out_s, long long min_s, long long max_s);
  // The raw YAML text of a string value, before ${...} expansion ("" when absent).
  std::string raw(const std::string& key) const;
  void one_of(const std::string& key, std::string& out, const std::set<std::string>& allowed);

  // An enum setting: one of the names in `names`, stored as its value.
  template <class Enum>
  void one_of(const std::string& key, Enum& out, const std::map<std::string, Enum>& names) {
    std::set<std::string> allowed;
    for (const auto& [name, value] : names) allowed.insert(name);
    std::string text;
    one_of(key, text, allowed);
    if (!text.empty()) out = names.at(text);
  }

  // Refuses the keys nothing read, suggesting the known key each probably meant.
  void finish() const;

  // For a required `key` that is missing: the key given instead that is probably it
  // misspelled (" ('dns' on line 3 is not a key: did you mean 'dsn'?)"), or "".
  std::string misspelling_of(const std::string& key) const;

  const YAML::Node& node() const { return node_; }

 private:
  // The text of ${NAME}: the environment variable NAME, or the file of ${file:PATH}.
  std::string reference_value(const YAML::Node& at, const std::string& key, const std::string& name) const;
  static std::string shown(const YAML::Node& v);
  static std::string kind(const YAML::Node& v);
  void reject_duplicate_keys() const;
  YAML::Node take(const std::string& key);
  std::string expand_env(const YAML::Node& at, const std::string& key, const std::string& raw) const;
  std::string read_secret_file(const YAML::Node& at, const std::string& key, const std::string& path) const;
  std::string with_missing(std::string message) const;
  // A required `key` is absent: missing(), naming the key probably meant instead.
  void absent(const std::string& key);

  YAML::Node node_;
  std::string path_;
  const std::string& origin_;
  std::vector<std::string>* missing_;
  std::set<std::string> seen_;
};

}  // namespace relay
