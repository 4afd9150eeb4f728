#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// EventSchema: the shape of one event type's JSON payload and which of its fields
// hold personal data, from a YAML file in schema/events/.

#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace outbox {

class PayloadJson;

// A JSON-Schema subset: `type` object, string, number, integer, boolean or array;
// `properties`, `required` and `additionalProperties` (default false: a field the
// schema does not declare is a field nobody classified, so it is refused) for
// objects; `items` for arrays; `title`/`description` anywhere. Extensions:
//   x-event-type: OrderPlaced        root: the message type this schema describes
//   x-gdpr-sensitive: true           any node: the value is encrypted at enqueue
//   x-gdpr-searchable: true | NAME   a sensitive scalar also gets a blind index
//   x-gdpr-subject: customer.id      root: crypto-shredding key per value of this
//                                    required, non-sensitive string/integer field
// Unknown keywords are errors, so a typo like `x-gdpr-sensitve` never silently
// leaves a field in clear.
//
// JSON paths in errors and in the encryption AAD look like "$.customer.email" or
// "$.lines[2].gift_message". Property names are [A-Za-z_][A-Za-z0-9_-]*, so a path
// reads one way only.
// Thread safety: immutable after parse; copies share the parsed tree.
class EventSchema {
 public:
  // Parses a schema; `source` (usually the file path) prefixes every error.
  // Throws ValidationError naming the source, the schema path and the line.
  static EventSchema parse(const std::string& yaml, const std::string& source);
  static EventSchema load_file(const std::string& path);

  // A sensitive value found in a payload.
  struct SensitiveField {
    std::string path;        // concrete JSON path, e.g. "$.lines[0].gift_message"
    std::string index_name;  // blind index name when searchable, else empty
  };
  using SensitiveVisitor = std::function<void(const SensitiveField&, nlohmann::json& value)>;

  // The event type (x-event-type, or the file name without extension).
  const std::string& type() const;

  // Throws SchemaValidationError naming the JSON path of the first violation
  // (missing required field, wrong type, undeclared field). Never echoes a value;
  // inside a sensitive value, whose keys and shape are part of its plaintext, the
  // path is the value's own followed by the schema's pattern below it
  // ("$.customer.address.postcode", "$.lines[1].notes.visits[]"), and an
  // undeclared key there is not named.
  void validate(const nlohmann::json& payload) const;

  // The JSON path to name in an error about the place where `refused` (a
  // PayloadJson that is not ok()) stopped, by the same rule as validate().
  std::string error_path(const PayloadJson& refused) const;

  // Calls `visit` for every sensitive value present in `payload`, depth first in
  // schema order. Parts of the payload that do not match the schema's shape are
  // skipped (validate() reports them).
  void for_each_sensitive(nlohmann::json& payload, const SensitiveVisitor& visit) const;

  bool has_sensitive_fields() const;
  bool has_searchable_fields() const;
  // Schema-level patterns of the sensitive fields, e.g. "$.lines[].gift_message".
  std::vector<std::string> sensitive_patterns() const;

  // Dotted path of the subject field ("" when the schema has none).
  const std::string& subject_field() const;
  // The subject's value as text (an integer in decimal). REQUIRES: a validated
  // payload and a non-empty subject_field(). Throws SchemaValidationError if empty.
  std::string subject_of(const nlohmann::json& payload) const;

  struct Node;  // the parsed tree, defined in event_schema.cpp

 private:
  std::shared_ptr<const Node> root_;
};

}  // namespace outbox
