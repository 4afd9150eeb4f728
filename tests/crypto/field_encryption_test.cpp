// Field encryption without servers: envelopes, rotation, tampering, nonces,
// blind indexes. Subject keys come from an in-memory fetcher here; the
// PostgreSQL store is covered by subject_keys_pgtest.
#include <doctest/doctest.h>

#include <unordered_set>

#include "crypto_test_support.h"
#include "outbox/crypto_errors.h"
#include "outbox/field_decryptor.h"
#include "outbox/field_encryptor.h"
#include "outbox/field_envelope.h"
#include "outbox/schema_registry.h"

using namespace outbox;
using cryptotest::contains;
using nlohmann::json;

namespace {

const char* kProfileSchema = R"(
x-event-type: ProfileChanged
type: object
required: [customer_id, profile]
properties:
  customer_id: {type: integer}
  profile:
    type: object
    required: [name]
    properties:
      name: {type: string, x-gdpr-sensitive: true}
      birth_year: {type: integer, x-gdpr-sensitive: true}
      address: {type: object, x-gdpr-sensitive: true, additionalProperties: true}
  contacts:
    type: array
    items:
      type: object
      properties:
        kind: {type: string}
        value: {type: string, x-gdpr-sensitive: true}
  nicknames: {type: array, items: {type: string, x-gdpr-sensitive: true}}
  email: {type: string, x-gdpr-sensitive: true, x-gdpr-searchable: email}
)";

std::shared_ptr<const SchemaRegistry> registry_of(const char* yaml) {
  auto r = std::make_shared<SchemaRegistry>();
  r->add(EventSchema::parse(yaml, "test.yaml"));
  return r;
}

json profile() {
  return {{"customer_id", 77},
          {"profile",
           {{"name", "Grace Hopper"}, {"birth_year", 1906}, {"address", {{"city", "Arlington"}, {"zip", "22201"}}}}},
          {"contacts", {{{"kind", "phone"}, {"value", "+1-555-0100"}}, {{"kind", "fax"}, {"value", "+1-555-0199"}}}},
          {"nicknames", {"Amazing Grace", "Grandma COBOL"}},
          {"email", "grace@navy.example"}};
}

const std::vector<std::string> kProfilePlaintexts = {"Grace Hopper",  "Arlington",         "22201",
                                                     "+1-555-0100",   "+1-555-0199",       "Amazing Grace",
                                                     "Grandma COBOL", "grace@navy.example"};

struct Fixture {
  cryptotest::KeyTexts keys = cryptotest::key_texts({"k1"});
  cryptotest::KeyTexts index = cryptotest::key_texts({"b1"});
  std::shared_ptr<const Keyring> ring = cryptotest::keyring(keys, "k1", index, "b1");
  std::shared_ptr<const SchemaRegistry> schemas = registry_of(kProfileSchema);
  FieldEncryptor encryptor{ring};
  FieldDecryptor decryptor{ring, schemas};
  MessageId id = MessageId::generate_v7();

  json sealed(json payload = profile()) const {
    const auto& schema = *schemas->find("ProfileChanged");
    schema.validate(payload);
    encryptor.encrypt(schema, payload, id);
    return payload;
  }
  void restore(json& payload) const { decryptor.decrypt("ProfileChanged", payload, id); }
};

// Decrypting `payload` must throw DecryptionError (a PermanentError) whose message
// names `path` and none of the plaintexts.
void require_refused(const Fixture& f, json payload, const std::string& path, const MessageId* id = nullptr) {
  try {
    f.decryptor.decrypt("ProfileChanged", payload, id ? *id : f.id);
    FAIL("decryption succeeded on a tampered payload");
  } catch (const DecryptionError& e) {
    const PermanentError& permanent = e;  // the consumer runner dead-letters these
    CHECK(e.path() == path);
    for (const auto& p : kProfilePlaintexts) CHECK_FALSE(contains(permanent.what(), p));
  }
}

}  // namespace

TEST_CASE("sensitive fields at any depth and inside arrays round-trip with their types; the rest stays readable") {
  Fixture f;
  auto sealed = f.sealed();
  const auto text = sealed.dump();
  for (const auto& p : kProfilePlaintexts) CHECK_FALSE(contains(text, p));
  CHECK(sealed["customer_id"] == 77);
  CHECK(sealed["contacts"][0]["kind"] == "phone");
  CHECK(sealed["profile"]["name"]["$enc"] == "v1");
  CHECK(sealed["profile"]["name"]["kid"] == "k1");
  CHECK(sealed["profile"]["address"].contains("$enc"));  // a whole object is one envelope
  CHECK(sealed["contacts"][1]["value"].contains("$enc"));
  CHECK(sealed["nicknames"][1].contains("$enc"));
  CHECK(sealed["profile"]["birth_year"].contains("$enc"));

  f.restore(sealed);
  CHECK(sealed == profile());
  CHECK(sealed["profile"]["birth_year"].is_number_integer());
  CHECK(f.decryptor.decrypt("ProfileChanged", f.sealed().dump(), f.id) == profile().dump());
}

TEST_CASE("optional sensitive fields that are absent stay absent") {
  Fixture f;
  json minimal = {{"customer_id", 1}, {"profile", {{"name", "N"}}}};
  auto sealed = f.sealed(minimal);
  CHECK_FALSE(sealed.contains("email"));
  f.restore(sealed);
  CHECK(sealed == minimal);
}

TEST_CASE("rotation across three keys: each message names its key and all decrypt with the current keyring") {
  auto keys = cryptotest::key_texts({"k1", "k2", "k3"});
  auto schemas = registry_of(kProfileSchema);
  const auto& schema = *schemas->find("ProfileChanged");
  auto index = cryptotest::key_texts({"b1"});
  std::vector<std::pair<MessageId, json>> sent;
  // Generation 1 knows k1; generation 2 adds k2 and makes it active; generation 3 adds k3.
  std::vector<cryptotest::KeyTexts> generations = {
      {{"k1", keys["k1"]}}, {{"k1", keys["k1"]}, {"k2", keys["k2"]}}, keys};
  for (std::size_t g = 0; g < generations.size(); ++g) {
    auto ring = cryptotest::keyring(generations[g], "k" + std::to_string(g + 1), index, "b1");
    json payload = profile();
    auto id = MessageId::generate_v7();
    FieldEncryptor(ring).encrypt(schema, payload, id);
    CHECK(payload["profile"]["name"]["kid"] == "k" + std::to_string(g + 1));
    sent.emplace_back(id, payload);
  }
  FieldDecryptor current(cryptotest::keyring(keys, "k3", index, "b1"), schemas);
  for (auto& [id, payload] : sent) {
    auto copy = payload;
    current.decrypt("ProfileChanged", copy, id);
    CHECK(copy == profile());
  }
  // A keyring that dropped k1 refuses the oldest message, naming the key id.
  FieldDecryptor without_k1(cryptotest::keyring({{"k2", keys["k2"]}, {"k3", keys["k3"]}}, "k3", index, "b1"), schemas);
  auto oldest = sent[0].second;
  try {
    without_k1.decrypt("ProfileChanged", oldest, sent[0].first);
    FAIL("decrypted without its key");
  } catch (const DecryptionError& e) {
    CHECK(contains(e.what(), "unknown key id 'k1'"));
  }
  CHECK(oldest == sent[0].second);  // left untouched
}

TEST_CASE("a flipped bit in the nonce, the tag or the ciphertext fails to decrypt") {
  Fixture f;
  for (const char* member : {"iv", "tag", "ct"}) {
    CAPTURE(member);
    auto sealed = f.sealed();
    cryptotest::flip_bit(sealed["profile"]["name"], member);
    require_refused(f, sealed, "$.profile.name");
  }
  auto sealed = f.sealed();
  cryptotest::flip_bit(sealed["contacts"][1]["value"], "ct", 3);
  require_refused(f, sealed, "$.contacts[1].value");
}

TEST_CASE("an envelope moved to another field, array element or message fails to decrypt") {
  Fixture f;
  SUBCASE("another field") {
    auto sealed = f.sealed();
    sealed["profile"]["name"] = sealed["email"];
    require_refused(f, sealed, "$.profile.name");
  }
  SUBCASE("swapped array elements") {
    auto sealed = f.sealed();
    std::swap(sealed["nicknames"][0], sealed["nicknames"][1]);
    require_refused(f, sealed, "$.nicknames[0]");
  }
  SUBCASE("another message") {
    auto sealed = f.sealed();
    auto other = MessageId::generate_v7();
    require_refused(f, sealed, "$.profile.name", &other);
  }
  SUBCASE("the same field of another message") {
    auto first = f.sealed();
    auto other_id = MessageId::generate_v7();
    json payload = profile();
    f.encryptor.encrypt(*f.schemas->find("ProfileChanged"), payload, other_id);
    first["profile"]["name"] = payload["profile"]["name"];
    require_refused(f, first, "$.profile.name");
  }
}

TEST_CASE("a changed key id, an unknown key id or a replaced blind index fails to decrypt") {
  auto keys = cryptotest::key_texts({"k1", "k2"});
  Fixture f;
  f.ring = cryptotest::keyring(keys, "k1", f.index, "b1");
  f.encryptor = FieldEncryptor(f.ring);
  f.decryptor = FieldDecryptor(f.ring, f.schemas);
  SUBCASE("relabelled to another key of the keyring") {
    auto sealed = f.sealed();
    sealed["profile"]["name"]["kid"] = "k2";
    require_refused(f, sealed, "$.profile.name");
  }
  SUBCASE("a key id the keyring does not hold") {
    auto sealed = f.sealed();
    sealed["profile"]["name"]["kid"] = "k9";
    require_refused(f, sealed, "$.profile.name");
  }
  SUBCASE("the blind index of another value") {
    auto sealed = f.sealed();
    sealed["email"]["bidx"] = cryptotest::base64(FieldEnvelope::blind_index(f.ring->index_active_key(), "email",
                                                                            json("mallory@example.org")));
    require_refused(f, sealed, "$.email");
  }
}

TEST_CASE("a plain value, a malformed envelope or an unexpected envelope is refused") {
  Fixture f;
  SUBCASE("plain value where the schema says sensitive") {
    auto sealed = f.sealed();
    sealed["profile"]["name"] = "Mallory";
    require_refused(f, sealed, "$.profile.name");
  }
  SUBCASE("unknown envelope version") {
    auto sealed = f.sealed();
    sealed["profile"]["name"]["$enc"] = "v9";
    require_refused(f, sealed, "$.profile.name");
  }
  SUBCASE("nonce of the wrong length") {
    auto sealed = f.sealed();
    sealed["profile"]["name"]["iv"] = cryptotest::base64("short");
    require_refused(f, sealed, "$.profile.name");
  }
  SUBCASE("not base64") {
    auto sealed = f.sealed();
    sealed["profile"]["name"]["ct"] = "!!!!";
    require_refused(f, sealed, "$.profile.name");
  }
  SUBCASE("an envelope in a field the schema does not mark sensitive") {
    auto sealed = f.sealed();
    sealed["contacts"][0]["kind"] = sealed["contacts"][0]["value"];
    require_refused(f, sealed, "$.contacts[0].kind");
  }
  SUBCASE("not JSON at all") {
    CHECK_THROWS_AS(f.decryptor.decrypt("ProfileChanged", std::string_view("{nope"), f.id), DecryptionError);
  }
}

TEST_CASE("a payload nested too deep or with a number a double cannot carry is refused, not crashed on or changed") {
  Fixture f;
  const std::string deep = "{\"customer_id\": 1, \"x\": " + std::string(40000, '[') + std::string(40000, ']') + "}";
  CHECK_THROWS_WITH_AS(f.decryptor.decrypt("ProfileChanged", deep, f.id), doctest::Contains("nested deeper than 128"),
                       DecryptionError);
  CHECK_THROWS_WITH_AS(f.decryptor.decrypt("NoSchema", deep, f.id), doctest::Contains("nested deeper than 128"),
                       DecryptionError);
  auto sealed = f.sealed().dump();
  const auto at = sealed.find("\"customer_id\":77");
  REQUIRE(at != std::string::npos);
  sealed.replace(at, 16, "\"customer_id\":123456789012345678901");
  try {
    f.decryptor.decrypt("ProfileChanged", sealed, f.id);
    FAIL("decrypted a payload whose customer_id would have changed");
  } catch (const DecryptionError& e) {
    CHECK(e.path() == "$.customer_id");
    CHECK_FALSE(contains(e.what(), "123456789012345678901"));
  }
}

TEST_CASE("without a schema every envelope found is opened with its own path") {
  Fixture f;
  auto sealed = f.sealed();
  FieldDecryptor schemaless(f.ring);
  auto copy = sealed;
  schemaless.decrypt("ProfileChanged", copy, f.id);
  CHECK(copy == profile());
  std::swap(sealed["nicknames"][0], sealed["nicknames"][1]);
  CHECK_THROWS_AS(schemaless.decrypt("ProfileChanged", sealed, f.id), DecryptionError);
}

TEST_CASE("one million encryptions draw one million distinct nonces") {
  auto ring = cryptotest::keyring(cryptotest::key_texts({"k1"}), "k1");
  const auto id = MessageId::generate_v7();
  const json value = "x";
  std::unordered_set<std::string> nonces;
  constexpr int kCount = 1'000'000;
  nonces.reserve(kCount);
  for (int i = 0; i < kCount; ++i) {
    auto env = FieldEnvelope::seal(ring->active_key(), FieldEnvelope::KeyKind::kMaster, "k1", id, "$.f", value);
    nonces.emplace(reinterpret_cast<const char*>(env.nonce().data()), env.nonce().size());
  }
  CHECK(nonces.size() == kCount);
}

TEST_CASE("a blind index matches equal values of one index and nothing else, and is authenticated") {
  Fixture f;
  auto sealed = f.sealed();
  const auto& key = f.ring->index_active_key();
  CHECK(sealed["email"]["bkid"] == "b1");
  const auto bidx = cryptotest::unbase64(sealed["email"]["bidx"].get<std::string>());
  CHECK(bidx == FieldEnvelope::blind_index(key, "email", json("grace@navy.example")));
  CHECK(bidx != FieldEnvelope::blind_index(key, "email", json("Grace@navy.example")));
  CHECK(bidx != FieldEnvelope::blind_index(key, "other_index", json("grace@navy.example")));
  // Two messages with the same address: same index, different ciphertexts.
  auto again = f.sealed();
  CHECK(again["email"]["bidx"] == sealed["email"]["bidx"]);
  CHECK(again["email"]["ct"] != sealed["email"]["ct"]);
  // A different index key gives unrelated values: the index is useless without the key.
  auto other_ring = cryptotest::keyring(f.keys, "k1", cryptotest::key_texts({"b1"}), "b1");
  CHECK(FieldEnvelope::blind_index(other_ring->index_active_key(), "email", json("grace@navy.example")) != bidx);
}

TEST_CASE("an encryptor refuses a schema with searchable fields when the keyring has no blind-index keys") {
  auto ring = cryptotest::keyring(cryptotest::key_texts({"k1"}), "k1");
  auto schemas = registry_of(kProfileSchema);
  CHECK_THROWS_WITH_AS(FieldEncryptor(ring).check(*schemas->find("ProfileChanged")),
                       doctest::Contains("no blind_index keys"), ValidationError);
}

TEST_CASE("subject-keyed fields need the subject's key; an erased subject is a permanent error naming the field") {
  auto ring = cryptotest::keyring(cryptotest::key_texts({"k1"}), "k1");
  auto schemas = std::make_shared<SchemaRegistry>(SchemaRegistry::load_directory(OUTBOX_EVENT_SCHEMA_DIR));
  const auto& schema = *schemas->find("OrderPlaced");
  auto c = cryptotest::customer("7");
  auto payload = cryptotest::order_placed(1, c);
  schema.validate(payload);
  auto id = MessageId::generate_v7();
  SubjectKeyStore::DataKey dk{"sk_0123456789abcdef0123456789abcdef", SecretKey::random()};
  auto raw = std::string(reinterpret_cast<const char*>(dk.key.data()), SecretKey::kBytes);
  FieldEncryptor(ring).encrypt(schema, payload, id, &dk);
  CHECK(payload["customer"]["name"]["skid"] == dk.key_id);
  CHECK(payload["customer"]["id"] == c.id);
  for (const auto& p : c.sensitive()) CHECK_FALSE(contains(payload.dump(), p));

  bool erased = false;
  FieldDecryptor decryptor(ring, schemas, [&](const std::string& key_id) {
    if (erased) throw SubjectErasedError("subject key '" + key_id + "'", "erased");
    return SubjectKeyStore::DataKey{key_id, SecretKey::from_bytes(raw)};
  });
  auto copy = payload;
  decryptor.decrypt("OrderPlaced", copy, id);
  CHECK(copy == cryptotest::order_placed(1, c));

  erased = true;
  copy = payload;
  CHECK_THROWS_AS(decryptor.decrypt("OrderPlaced", copy, id), SubjectErasedError);
  CHECK(copy == payload);
  CHECK_THROWS_AS(FieldDecryptor(ring, schemas).decrypt("OrderPlaced", copy, id), DecryptionError);
}
