#include "outbox/event_schema.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "outbox/bounded_read.h"
#include "outbox/crypto_errors.h"
#include "outbox/error_text.h"
#include "outbox/payload_json.h"

namespace outbox {

enum class Kind { kObject, kString, kNumber, kInteger, kBoolean, kArray };

struct EventSchema::Node {
  Kind kind = Kind::kObject;
  std::string pattern;  // "$.lines[].gift_message"
  bool sensitive = false;
  std::string index_name;          // non-empty: searchable
  std::vector<std::string> names;  // object: property names, in file order
  std::vector<Node> properties;    // object: one node per name
  std::set<std::string> required;
  bool additional_properties = false;
  std::vector<Node> items;  // array: exactly one node
  // Root only.
  std::string type;
  std::string subject;  // dotted path, or empty
};

namespace {

using Node = EventSchema::Node;

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kObject: return "object";
    case Kind::kString: return "string";
    case Kind::kNumber: return "number";
    case Kind::kInteger: return "integer";
    case Kind::kBoolean: return "boolean";
    case Kind::kArray: return "array";
  }
  return "?";
}

bool valid_property_name(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (i > 0 && ((c >= '0' && c <= '9') || c == '-'));
    if (!ok) return false;
  }
  return true;
}

// Builds a Node from YAML; every error names the source, the schema path and the line.
class SchemaParser {
 public:
  explicit SchemaParser(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const YAML::Node& at, const std::string& pattern, const std::string& what) const {
    std::string line = at.Mark().is_null() ? "" : " (line " + std::to_string(at.Mark().line + 1) + ")";
    throw ValidationError("event schema " + source_, pattern + ": " + what + line);
  }

  bool flag(const YAML::Node& y, const char* key, const std::string& pattern) const {
    const auto v = y[key];
    if (!v) return false;
    if (!v.IsScalar() || (v.Scalar() != "true" && v.Scalar() != "false"))
      fail(v, pattern, std::string(key) + " must be true or false");
    return v.Scalar() == "true";
  }

  // `depth`: 0 for the root. YAML aliases make the document a graph: one that refers
  // to a node containing it is a cycle, and aliases repeated level after level grow
  // as 2^levels. Both stop at a bound instead of exhausting the stack or the memory.
  Node node(const YAML::Node& y, const std::string& pattern, bool in_sensitive, std::size_t depth) {
    if (depth > PayloadJson::kMaxDepth)
      fail(y, pattern,
           "nested deeper than " + std::to_string(PayloadJson::kMaxDepth) +
               " levels, which no payload may be (a YAML alias that refers to a node containing it?)");
    if (++nodes_ > kMaxNodes)
      fail(y, pattern, "more than " + std::to_string(kMaxNodes) + " schema nodes (YAML aliases repeated?)");
    if (!y.IsMap()) fail(y, pattern, "expected a mapping with a 'type'");
    const bool root = depth == 0;
    Node n;
    n.pattern = pattern;
    n.kind = kind_of(y, pattern);
    check_keywords(y, n.kind, pattern, root);
    n.sensitive = flag(y, "x-gdpr-sensitive", pattern);
    if (n.sensitive && in_sensitive) fail(y, pattern, "x-gdpr-sensitive inside a field that is already sensitive");
    parse_searchable(y, n);
    if (n.kind == Kind::kObject) parse_object(y, n, in_sensitive || n.sensitive, depth);
    if (n.kind == Kind::kArray) {
      if (!y["items"]) fail(y, pattern, "an array needs 'items'");
      n.items.push_back(node(y["items"], pattern + "[]", in_sensitive || n.sensitive, depth + 1));
    }
    return n;
  }

 private:
  Kind kind_of(const YAML::Node& y, const std::string& pattern) const {
    const auto t = y["type"];
    if (!t || !t.IsScalar()) fail(y, pattern, "'type' is required (object, string, number, integer, boolean, array)");
    for (Kind k : {Kind::kObject, Kind::kString, Kind::kNumber, Kind::kInteger, Kind::kBoolean, Kind::kArray})
      if (t.Scalar() == kind_name(k)) return k;
    fail(t, pattern,
         "unsupported type " + quoted_value(t.Scalar()) + " (object, string, number, integer, boolean, array)");
  }

  // yaml-cpp keeps both pairs of a key given twice but y[key] finds the first: a
  // later `x-gdpr-sensitive: true` would leave the field in clear. So each once.
  void check_keywords(const YAML::Node& y, Kind kind, const std::string& pattern, bool root) const {
    std::vector<std::string> seen;
    for (const auto& kv : y) {
      const auto key = kv.first.as<std::string>();
      if (std::find(seen.begin(), seen.end(), key) != seen.end())
        fail(kv.first, pattern, "keyword " + quoted_value(key) + " given twice; each keyword may appear once");
      seen.push_back(key);
      bool ok = key == "type" || key == "title" || key == "description" || key == "x-gdpr-sensitive" ||
                key == "x-gdpr-searchable";
      ok = ok || (kind == Kind::kObject && (key == "properties" || key == "required" || key == "additionalProperties"));
      ok = ok || (kind == Kind::kArray && key == "items");
      ok = ok || (root && (key == "$schema" || key == "$id" || key == "x-event-type" || key == "x-gdpr-subject"));
      if (!ok)
        fail(kv.first, pattern, "unknown or misplaced keyword " + quoted_value(key) + " for type " + kind_name(kind));
    }
  }

  void parse_searchable(const YAML::Node& y, Node& n) const {
    const auto s = y["x-gdpr-searchable"];
    if (!s || (s.IsScalar() && s.Scalar() == "false")) return;
    if (!s.IsScalar()) fail(s, n.pattern, "x-gdpr-searchable must be true or an index name");
    if (!n.sensitive) fail(s, n.pattern, "x-gdpr-searchable needs x-gdpr-sensitive: true on the same field");
    if (n.kind == Kind::kObject || n.kind == Kind::kArray)
      fail(s, n.pattern, "only a string, number, integer or boolean can be searchable");
    n.index_name = s.Scalar() == "true" ? n.pattern : s.Scalar();
    if (!valid_property_name(n.index_name) && n.index_name != n.pattern)
      fail(s, n.pattern, "an index name is [A-Za-z_][A-Za-z0-9_-]*");
  }

  void parse_object(const YAML::Node& y, Node& n, bool in_sensitive, std::size_t depth) {
    if (const auto props = y["properties"]) {
      if (!props.IsMap()) fail(props, n.pattern, "'properties' must be a mapping");
      for (const auto& kv : props) {
        const auto name = kv.first.as<std::string>();
        if (!valid_property_name(name))
          fail(kv.first, n.pattern, "property name " + quoted_value(name) + " is not [A-Za-z_][A-Za-z0-9_-]*");
        for (const auto& seen : n.names)
          if (seen == name) fail(kv.first, n.pattern, "property " + quoted_value(name) + " declared twice");
        n.names.push_back(name);
        n.properties.push_back(node(kv.second, n.pattern + "." + name, in_sensitive, depth + 1));
      }
    }
    if (const auto req = y["required"]) {
      if (!req.IsSequence()) fail(req, n.pattern, "'required' must be a list of property names");
      for (const auto& r : req) {
        const auto name = r.as<std::string>();
        if (std::find(n.names.begin(), n.names.end(), name) == n.names.end())
          fail(r, n.pattern, "required property " + quoted_value(name) + " is not declared in 'properties'");
        n.required.insert(name);
      }
    }
    n.additional_properties = flag(y, "additionalProperties", n.pattern);
  }

  // Far more fields than an event has, far fewer than memory holds.
  static constexpr std::size_t kMaxNodes = 10000;

  std::string source_;
  std::size_t nodes_ = 0;
};

const Node* child(const Node& n, const std::string& name) {
  for (std::size_t i = 0; i < n.names.size(); ++i)
    if (n.names[i] == name) return &n.properties[i];
  return nullptr;
}

// The subject field: required all the way down, outside arrays, not sensitive,
// a string or an integer.
void check_subject(const YAML::Node& at, const Node& root, SchemaParser& parser) {
  const Node* n = &root;
  std::stringstream segments(root.subject);
  std::string name, pattern = "$";
  while (std::getline(segments, name, '.')) {
    pattern += "." + name;
    const Node* next = n->kind == Kind::kObject ? child(*n, name) : nullptr;
    if (!next)
      parser.fail(at, "$", "x-gdpr-subject " + quoted_value(root.subject) + ": " + pattern + " is not declared");
    if (!n->required.count(name))
      parser.fail(at, "$", "x-gdpr-subject " + quoted_value(root.subject) + ": " + pattern + " must be required");
    if (next->sensitive)
      parser.fail(at, "$", "x-gdpr-subject " + quoted_value(root.subject) + ": " + pattern + " must not be sensitive");
    n = next;
  }
  if (n == &root || (n->kind != Kind::kString && n->kind != Kind::kInteger))
    parser.fail(at, "$", "x-gdpr-subject " + quoted_value(root.subject) + " must name a string or integer field");
}

bool any_node(const Node& n, const std::function<bool(const Node&)>& pred) {
  if (pred(n)) return true;
  for (const auto& p : n.properties)
    if (any_node(p, pred)) return true;
  for (const auto& i : n.items)
    if (any_node(i, pred)) return true;
  return false;
}

std::string json_kind(const nlohmann::json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  return v.type_name();
}

bool matches(Kind kind, const nlohmann::json& v) {
  switch (kind) {
    case Kind::kObject: return v.is_object();
    case Kind::kString: return v.is_string();
    case Kind::kNumber: return v.is_number();
    case Kind::kBoolean: return v.is_boolean();
    case Kind::kArray: return v.is_array();
    case Kind::kInteger:
      if (v.is_number_integer() || v.is_number_unsigned()) return true;
      if (v.is_number_float()) {
        double d = v.get<double>();
        return std::isfinite(d) && std::floor(d) == d;  // JSON Schema: 2.0 is an integer
      }
      return false;
  }
  return false;
}

// The path an error names for node `n` at `path`. Inside a sensitive value (`secret`,
// reached at `path`, which then stays its path) the payload's keys and indexes are
// the plaintext's: the schema's pattern below the value stands in for them.
std::string shown_path(const Node& n, const std::string& path, const Node* secret) {
  return secret ? path + n.pattern.substr(secret->pattern.size()) : path;
}

void validate_node(const Node& n, const nlohmann::json& v, const std::string& path, const Node* secret) {
  if (!matches(n.kind, v))
    throw SchemaValidationError(shown_path(n, path, secret),
                                std::string("expected ") + kind_name(n.kind) + ", got " + json_kind(v));
  if (!secret && n.sensitive) secret = &n;
  if (n.kind == Kind::kArray) {
    for (std::size_t i = 0; i < v.size(); ++i)
      validate_node(n.items[0], v[i], secret ? path : path + "[" + std::to_string(i) + "]", secret);
    return;
  }
  if (n.kind != Kind::kObject) return;
  for (std::size_t i = 0; i < n.names.size(); ++i) {
    const std::string child_path = secret ? path : path + "." + n.names[i];
    auto it = v.find(n.names[i]);
    if (it == v.end()) {
      if (n.required.count(n.names[i]))
        throw SchemaValidationError(shown_path(n.properties[i], child_path, secret), "required field is missing");
      continue;
    }
    validate_node(n.properties[i], *it, child_path, secret);
  }
  if (n.additional_properties) return;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (child(n, it.key())) continue;
    if (secret)
      throw SchemaValidationError(shown_path(n, path, secret),
                                  "a field the schema does not declare (additionalProperties is false; names "
                                  "inside a sensitive value are not shown)");
    throw SchemaValidationError(valid_property_name(it.key()) ? path + "." + it.key() : path,
                                valid_property_name(it.key())
                                    ? "field not declared in the schema (additionalProperties is false)"
                                    : "a field name the schema does not declare (additionalProperties is false)");
  }
}

void walk_sensitive(const Node& n, nlohmann::json& v, const std::string& path,
                    const EventSchema::SensitiveVisitor& visit) {
  if (n.sensitive) {
    visit({path, n.index_name}, v);
    return;
  }
  if (n.kind == Kind::kObject && v.is_object()) {
    for (std::size_t i = 0; i < n.names.size(); ++i) {
      auto it = v.find(n.names[i]);
      if (it != v.end()) walk_sensitive(n.properties[i], *it, path + "." + n.names[i], visit);
    }
  } else if (n.kind == Kind::kArray && v.is_array()) {
    for (std::size_t i = 0; i < v.size(); ++i)
      walk_sensitive(n.items[0], v[i], path + "[" + std::to_string(i) + "]", visit);
  }
}

}  // namespace

EventSchema EventSchema::parse(const std::string& yaml, const std::string& source) {
  YAML::Node doc;
  try {
    doc = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    throw ValidationError("event schema " + source,
                          "not valid YAML: " + e.msg + " (line " + std::to_string(e.mark.line + 1) + ")");
  }
  SchemaParser parser(source);
  std::shared_ptr<Node> root;
  try {
    root = std::make_shared<Node>(parser.node(doc, "$", false, 0));
  } catch (const YAML::Exception& e) {  // e.g. a mapping where a property name belongs
    throw ValidationError("event schema " + source,
                          "malformed: " + e.msg + " (line " + std::to_string(e.mark.line + 1) + ")");
  }
  if (root->kind != Kind::kObject) parser.fail(doc, "$", "the payload must be an object");
  if (root->sensitive) parser.fail(doc, "$", "the payload as a whole cannot be sensitive: mark its fields");
  const auto type = doc["x-event-type"];
  if (type && (!type.IsScalar() || type.Scalar().empty())) parser.fail(type, "$", "x-event-type must be a name");
  root->type = type ? type.Scalar() : std::filesystem::path(source).stem().string();
  if (const auto subject = doc["x-gdpr-subject"]) {
    if (!subject.IsScalar() || subject.Scalar().empty())
      parser.fail(subject, "$", "x-gdpr-subject must be a dotted field path");
    root->subject = subject.Scalar();
    check_subject(subject, *root, parser);
    if (any_node(*root, [](const Node& n) { return !n.index_name.empty(); }))
      parser.fail(subject, "$",
                  "x-gdpr-searchable cannot be combined with x-gdpr-subject: a blind index would outlive "
                  "the erasure of a subject's key");
  }
  EventSchema schema;
  schema.root_ = std::move(root);
  return schema;
}

EventSchema EventSchema::load_file(const std::string& path) {
  constexpr std::size_t kMaxSchemaBytes = 1024 * 1024;  // a real schema is a few KiB
  const auto read = read_bounded(path, kMaxSchemaBytes);
  if (!read.ok()) throw ValidationError("event schema " + path, read.why(kMaxSchemaBytes));
  return parse(read.text, path);
}

const std::string& EventSchema::type() const { return root_->type; }
const std::string& EventSchema::subject_field() const { return root_->subject; }

void EventSchema::validate(const nlohmann::json& payload) const { validate_node(*root_, payload, "$", nullptr); }

std::string EventSchema::error_path(const PayloadJson& refused) const {
  const Node* n = root_.get();
  const Node* secret = nullptr;
  std::string path = "$";
  for (const auto& step : refused.steps()) {
    if (!secret && n && n->sensitive) secret = n;
    const Node* next = nullptr;
    if (n && step.array && n->kind == Kind::kArray) next = &n->items[0];
    if (n && !step.array && n->kind == Kind::kObject) next = child(*n, step.key);
    if (secret && !next) break;  // a key the schema does not declare, inside the value: the plaintext's
    if (!secret) path += step.array ? "[" + std::to_string(step.index) + "]" : "." + step.key;
    n = next;
  }
  return secret ? shown_path(*n, path, secret) : path;
}

void EventSchema::for_each_sensitive(nlohmann::json& payload, const SensitiveVisitor& visit) const {
  walk_sensitive(*root_, payload, "$", visit);
}

bool EventSchema::has_sensitive_fields() const {
  return any_node(*root_, [](const Node& n) { return n.sensitive; });
}

bool EventSchema::has_searchable_fields() const {
  return any_node(*root_, [](const Node& n) { return !n.index_name.empty(); });
}

std::vector<std::string> EventSchema::sensitive_patterns() const {
  std::vector<std::string> out;
  any_node(*root_, [&](const Node& n) {
    if (n.sensitive) out.push_back(n.pattern);
    return false;
  });
  return out;
}

std::string EventSchema::subject_of(const nlohmann::json& payload) const {
  const nlohmann::json* v = &payload;
  std::stringstream segments(root_->subject);
  std::string name, path = "$";
  while (std::getline(segments, name, '.')) {
    path += "." + name;
    v = &v->at(name);
  }
  std::string subject;
  if (v->is_string()) {
    subject = v->get<std::string>();
  } else if (v->is_number_float()) {
    // 5.0 is the subject of 5; past 2^53 a double no longer names one integer, so
    // two customers could share (and erase) one key.
    const double d = v->get<double>();
    if (!(std::fabs(d) <= 9007199254740992.0) || d != std::trunc(d))
      throw SchemaValidationError(path,
                                  "the subject (x-gdpr-subject) must be a string or an integer "
                                  "(a number past 2^53 is not exact: send it as a string)");
    subject = std::to_string(static_cast<long long>(d));
  } else {
    subject = v->dump();
  }
  if (subject.empty()) throw SchemaValidationError(path, "the subject (x-gdpr-subject) must not be empty");
  // JSON may carry \u0000; PostgreSQL text may not: the subject-key statement would
  // fail and abort the caller's transaction, business rows and all.
  if (subject.find('\0') != std::string::npos)
    throw SchemaValidationError(path, "the subject (x-gdpr-subject) must not contain NUL (\\u0000)");
  return subject;
}

}  // namespace outbox
