// Event schemas: the repository's own schema files, payload validation errors
// that name the JSON path, and schema mistakes caught at load time.
#include <doctest/doctest.h>

#include "crypto_test_support.h"
#include "outbox/crypto_errors.h"
#include "outbox/schema_registry.h"

using namespace outbox;
using cryptotest::contains;
using nlohmann::json;

namespace {

const EventSchema& order_placed_schema() {
  static const auto registry = SchemaRegistry::load_directory(OUTBOX_EVENT_SCHEMA_DIR);
  return *registry.find("OrderPlaced");
}

// The SchemaValidationError path for `payload`, checking the message shows no value.
std::string failing_path(const json& payload, const std::vector<std::string>& secrets) {
  try {
    order_placed_schema().validate(payload);
  } catch (const SchemaValidationError& e) {
    for (const auto& s : secrets) CHECK_FALSE(contains(e.what(), s));
    return e.path();
  }
  return "(valid)";
}

std::string schema_error(const std::string& yaml) {
  try {
    EventSchema::parse(yaml, "bad.yaml");
  } catch (const ValidationError& e) {
    CHECK(contains(e.what(), "bad.yaml"));
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("OrderPlaced marks the customer's name, e-mail, phones, address and gift messages sensitive") {
  const auto& s = order_placed_schema();
  CHECK(s.type() == "OrderPlaced");
  CHECK(s.subject_field() == "customer.id");
  CHECK(s.sensitive_patterns() == std::vector<std::string>{"$.customer.name", "$.customer.email", "$.customer.phones[]",
                                                           "$.customer.address", "$.lines[].gift_message"});
  auto c = cryptotest::customer("1");
  auto payload = cryptotest::order_placed(5, c);
  CHECK_NOTHROW(s.validate(payload));
  CHECK(s.subject_of(payload) == c.id);
  std::vector<std::string> visited;
  s.for_each_sensitive(payload, [&](const EventSchema::SensitiveField& f, json&) { visited.push_back(f.path); });
  CHECK(visited == std::vector<std::string>{"$.customer.name", "$.customer.email", "$.customer.phones[0]",
                                            "$.customer.phones[1]", "$.customer.address", "$.lines[0].gift_message"});
}

TEST_CASE("a payload that breaks its schema is refused with the JSON path and without the value") {
  auto c = cryptotest::customer("2");
  auto secrets = c.sensitive();
  auto p = cryptotest::order_placed(1, c);
  p["customer"].erase("email");
  CHECK(failing_path(p, secrets) == "$.customer.email");

  p = cryptotest::order_placed(1, c);
  p["customer"]["email"] = 42;
  CHECK(failing_path(p, secrets) == "$.customer.email");

  p = cryptotest::order_placed(1, c);
  p["lines"][1]["quantity"] = "two";
  CHECK(failing_path(p, secrets) == "$.lines[1].quantity");

  p = cryptotest::order_placed(1, c);
  p["lines"][0]["gift_message"] = json::array({c.gift});
  CHECK(failing_path(p, secrets) == "$.lines[0].gift_message");

  p = cryptotest::order_placed(1, c);
  p["customer"]["address"].erase("postcode");
  CHECK(failing_path(p, secrets) == "$.customer.address.postcode");

  p = cryptotest::order_placed(1, c);
  p["customer"]["tax_id"] = "DE123456789";  // undeclared: nobody classified it
  CHECK(failing_path(p, {"DE123456789"}) == "$.customer.tax_id");

  p = cryptotest::order_placed(1, c);
  p["order_id"] = 1.5;
  CHECK(failing_path(p, secrets) == "$.order_id");
  p["order_id"] = 2.0;  // JSON Schema: an integral number is an integer
  CHECK(failing_path(p, secrets) == "(valid)");

  CHECK(failing_path(json::array(), secrets) == "$");
}

TEST_CASE("schema mistakes are caught at load time with the schema path") {
  const std::string head = "type: object\nproperties:\n";
  CHECK(contains(schema_error(head + "  name: {type: string, x-gdpr-sensitve: true}\n"),
                 "$.name: unknown or misplaced keyword 'x-gdpr-sensitve'"));
  CHECK(contains(schema_error(head + "  name: {type: strin}\n"), "unsupported type 'strin'"));
  CHECK(contains(schema_error(head + "  name: {type: string, x-gdpr-searchable: true}\n"), "needs x-gdpr-sensitive"));
  CHECK(contains(schema_error(head + "  a: {type: object, x-gdpr-sensitive: true, properties: {b: {type: string, "
                                     "x-gdpr-sensitive: true}}}\n"),
                 "$.a.b: x-gdpr-sensitive inside a field that is already sensitive"));
  CHECK(contains(schema_error(head + "  list: {type: array}\n"), "needs 'items'"));
  CHECK(contains(schema_error("type: object\nrequired: [x]\nproperties: {y: {type: string}}\n"),
                 "required property 'x' is not declared"));
  CHECK(contains(schema_error("x-gdpr-subject: c.id\ntype: object\nproperties:\n  c: {type: object, properties: "
                              "{id: {type: string}}}\n"),
                 "must be required"));
  CHECK(contains(schema_error("x-gdpr-subject: id\ntype: object\nrequired: [id, e]\nproperties:\n  id: {type: "
                              "string}\n  e: {type: string, x-gdpr-sensitive: true, x-gdpr-searchable: true}\n"),
                 "cannot be combined"));
  CHECK(contains(schema_error("type: string\n"), "must be an object"));
  CHECK(contains(schema_error("type: object\nrequired: [{a: 1}]\nproperties: {a: {type: string}}\n"), "malformed"));
  CHECK(contains(schema_error("type: object\nproperties: {\"a.b\": {type: string}}\n"), "is not [A-Za-z_]"));
  // yaml-cpp would keep the first of two: the field would stay in clear.
  CHECK(contains(schema_error(head +
                              "  email:\n    type: string\n    x-gdpr-sensitive: false\n    x-gdpr-sensitive: true\n"),
                 "$.email: keyword 'x-gdpr-sensitive' given twice"));
  CHECK(contains(schema_error("type: object\nadditionalProperties: true\nproperties: {a: {type: string}}\n"
                              "properties: {b: {type: string, x-gdpr-sensitive: true}}\n"),
                 "keyword 'properties' given twice"));
}

TEST_CASE("an integer subject names one subject however it is written, and one past 2^53 is refused") {
  auto schema = EventSchema::parse(
      "x-gdpr-subject: n\ntype: object\nrequired: [n]\nproperties:\n"
      "  n: {type: integer}\n  s: {type: string, x-gdpr-sensitive: true}\n",
      "t.yaml");
  CHECK(schema.subject_of(json::parse(R"({"n": 5})")) == "5");
  CHECK(schema.subject_of(json::parse(R"({"n": 5.0})")) == "5");
  CHECK(schema.subject_of(json::parse(R"({"n": -42})")) == "-42");
  CHECK(schema.subject_of(json::parse(R"({"n": 18446744073709551615})")) == "18446744073709551615");
  // Each of these used to become -9223372036854775808: three customers, one key.
  for (const char* text : {R"({"n": 1e19})", R"({"n": 5e20})", R"({"n": -9.3e18})", R"({"n": 9007199254740994.0})"})
    CHECK_THROWS_WITH_AS(schema.subject_of(json::parse(text)), doctest::Contains("must be a string or an integer"),
                         SchemaValidationError);
}

TEST_CASE("a subject holding a NUL is refused naming its path, before it reaches PostgreSQL") {
  auto schema = EventSchema::parse(
      "x-gdpr-subject: customer_id\ntype: object\nrequired: [customer_id]\nproperties:\n"
      "  customer_id: {type: string}\n  s: {type: string, x-gdpr-sensitive: true}\n",
      "t.yaml");
  CHECK_THROWS_WITH_AS(schema.subject_of(json::parse(R"({"customer_id": "c-1\u0000x"})")),
                       doctest::Contains("$.customer_id: the subject (x-gdpr-subject) must not contain NUL"),
                       SchemaValidationError);
  CHECK(schema.subject_of(json::parse(R"({"customer_id": "c-1"})")) == "c-1");
}

TEST_CASE("a registry refuses two schemas for one event type") {
  SchemaRegistry r;
  r.add(EventSchema::parse("x-event-type: A\ntype: object\n", "a1.yaml"));
  CHECK_THROWS_WITH_AS(r.add(EventSchema::parse("x-event-type: A\ntype: object\n", "a2.yaml")),
                       doctest::Contains("two schemas"), ValidationError);
  CHECK(r.find("A") != nullptr);
  CHECK(r.find("B") == nullptr);
}

TEST_CASE("an error inside a sensitive value names no key or index of it, only the schema's pattern") {
  auto schema = EventSchema::parse(
      "type: object\nproperties:\n"
      "  id: {type: string}\n"
      "  profile:\n"
      "    type: object\n"
      "    x-gdpr-sensitive: true\n"
      "    properties:\n"
      "      name: {type: string}\n"
      "      visits: {type: array, items: {type: integer}}\n"
      "  lines: {type: array, items: {type: object, properties: {note: {type: object, "
      "x-gdpr-sensitive: true, properties: {text: {type: string}}}}}}\n",
      "Profile.yaml");
  const auto path_of = [&](const std::string& text, const std::string& secret) {
    try {
      schema.validate(json::parse(text));
    } catch (const SchemaValidationError& e) {
      CHECK_MESSAGE(!contains(e.what(), secret), e.what());
      return e.path();
    }
    return std::string("(valid)");
  };
  // The key is the plaintext's: the object is encrypted whole, its keys with it.
  CHECK(path_of(R"({"profile": {"name": "Ada", "Lovelace": 1}})", "Lovelace") == "$.profile");
  CHECK(path_of(R"({"lines": [{}, {"note": {"Lovelace": "x"}}]})", "Lovelace") == "$.lines[1].note");
  // How many visits the profile holds is its plaintext too: the pattern says where.
  CHECK(path_of(R"({"profile": {"visits": [1, 2, 3, "x"]}})", "[3]") == "$.profile.visits[]");
  // What the schema declares is no secret, and outside the value nothing changes.
  CHECK(path_of(R"({"profile": {"name": 5}})", "Ada") == "$.profile.name");
  CHECK(path_of(R"({"lines": [{}, {"note": {"text": 5}}]})", "Ada") == "$.lines[1].note.text");
  CHECK(path_of(R"({"id": "c-7", "Lovelace": 1})", "c-7") == "$.Lovelace");
}

TEST_CASE("a schema whose YAML aliases loop or multiply is refused at load, naming the bound") {
  // An alias to a node that contains it: the schema is a cycle.
  CHECK(contains(schema_error("type: object\nproperties:\n  node: &node\n    type: object\n"
                              "    properties:\n      child: *node\n"),
                 "nested deeper than 128 levels"));
  // Each level refers twice to the one before: 2^40 nodes from 40 lines.
  std::string yaml = "type: object\nproperties:\n  l0: &l0 {type: object, properties: {s: {type: string}}}\n";
  for (int i = 1; i <= 40; ++i)
    yaml += "  l" + std::to_string(i) + ": &l" + std::to_string(i) + " {type: object, properties: {a: *l" +
            std::to_string(i - 1) + ", b: *l" + std::to_string(i - 1) + "}}\n";
  CHECK(contains(schema_error(yaml), "more than 10000 schema nodes"));
  // A schema as deep as a payload may be still loads.
  std::string deep = "type: object\n", indent;
  for (int i = 0; i < 100; ++i) {
    deep += indent + "properties:\n" + indent + "  a:\n";
    indent += "    ";
    deep += indent + "type: object\n";
  }
  CHECK_NOTHROW(EventSchema::parse(deep, "deep.yaml"));
}
