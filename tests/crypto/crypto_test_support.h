#pragma once
// Helpers shared by the field-encryption tests: keyrings with known key text, the
// example OrderPlaced payload, and a search for plaintext in bytes.

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "outbox/keyring.h"
#include "test_text.h"

namespace cryptotest {

// Base64 of 32 fresh random bytes: one key as it appears in a keyring file.
inline std::string random_key_text(std::size_t bytes = 32) {
  std::vector<unsigned char> raw(bytes);
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1) throw std::runtime_error("RAND_bytes");
  std::string out(4 * ((bytes + 2) / 3) + 1, '\0');
  out.resize(static_cast<std::size_t>(EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), raw.data(),
                                                      static_cast<int>(raw.size()))));
  return out;
}

inline std::string base64(const std::string& raw) {
  std::string out(4 * ((raw.size() + 2) / 3) + 1, '\0');
  out.resize(static_cast<std::size_t>(EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                                      reinterpret_cast<const unsigned char*>(raw.data()),
                                                      static_cast<int>(raw.size()))));
  return out;
}

inline std::string unbase64(const std::string& text) {
  std::string out(text.size() / 4 * 3 + 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) throw std::runtime_error("bad base64 in test");
  std::size_t pad = 0;
  for (auto it = text.rbegin(); it != text.rend() && *it == '='; ++it) ++pad;
  out.resize(static_cast<std::size_t>(n) - pad);
  return out;
}

// Flips one bit of the base64-encoded member `name` of an envelope.
inline void flip_bit(nlohmann::json& envelope, const std::string& name, std::size_t byte = 0) {
  auto raw = unbase64(envelope.at(name).get<std::string>());
  raw.at(byte) = static_cast<char>(raw.at(byte) ^ 0x01);
  envelope[name] = base64(raw);
}

// Key texts by id, so several keyrings can share keys (rotation).
using KeyTexts = std::map<std::string, std::string>;

inline KeyTexts key_texts(const std::vector<std::string>& ids) {
  KeyTexts out;
  for (const auto& id : ids) out[id] = random_key_text();
  return out;
}

inline std::string keyring_yaml(const KeyTexts& keys, const std::string& active, const KeyTexts& index = {},
                                const std::string& index_active = "") {
  std::string y = "active: " + active + "\nkeys:\n";
  for (const auto& [id, k] : keys) y += "  " + id + ": " + k + "\n";
  if (!index.empty()) {
    y += "blind_index:\n  active: " + index_active + "\n  keys:\n";
    for (const auto& [id, k] : index) y += "    " + id + ": " + k + "\n";
  }
  return y;
}

inline std::shared_ptr<const outbox::Keyring> keyring(const KeyTexts& keys, const std::string& active,
                                                      const KeyTexts& index = {},
                                                      const std::string& index_active = "") {
  return std::make_shared<const outbox::Keyring>(outbox::Keyring::parse(keyring_yaml(keys, active, index, index_active),
                                                                        "test"));
}

// Sensitive values of the example payload, distinctive enough that finding one in
// any bytes means it leaked. `tag` keeps payloads of one test apart.
struct Customer {
  std::string id, name, email, phone, street, postcode, gift;
  std::vector<std::string> sensitive() const { return {name, email, phone, street, postcode, gift}; }
};

inline Customer customer(const std::string& tag) {
  return {"cust-" + tag,
          "Ada Lovelace-" + tag,
          "ada." + tag + "@example.org",
          "+44-20-7946-" + tag,
          "12 Marylebone Rd " + tag,
          "NW1 " + tag,
          "Happy birthday Ada " + tag};
}

// An OrderPlaced payload per schema/events/OrderPlaced.yaml.
inline nlohmann::json order_placed(long long order_id, const Customer& c) {
  return {{"order_id", order_id},
          {"total_cents", 4200},
          {"currency", "EUR"},
          {"customer",
           {{"id", c.id},
            {"name", c.name},
            {"email", c.email},
            {"phones", {c.phone, c.phone + "-2"}},
            {"address", {{"street", c.street}, {"city", "London"}, {"postcode", c.postcode}, {"country", "GB"}}}}},
          {"lines",
           {{{"sku", "BOOK-1"}, {"quantity", 1}, {"price_cents", 4000}, {"gift_message", c.gift}},
            {{"sku", "WRAP"}, {"quantity", 1}, {"price_cents", 200}}}}};
}

// Whether `haystack` contains `needle` as bytes (the shared test helper).
using testenv::contains;

}  // namespace cryptotest
