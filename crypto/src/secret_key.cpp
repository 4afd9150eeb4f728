#include "outbox/secret_key.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <cstring>
#include <stdexcept>

namespace outbox {

SecretKey SecretKey::random() {
  SecretKey key;
  if (RAND_bytes(key.bytes_.data(), static_cast<int>(kBytes)) != 1)
    throw std::runtime_error("RAND_bytes failed to produce a key");
  return key;
}

SecretKey SecretKey::from_bytes(std::string_view raw) {
  if (raw.size() != kBytes)
    throw std::invalid_argument("a key must be exactly 32 bytes, got " + std::to_string(raw.size()));
  SecretKey key;
  std::memcpy(key.bytes_.data(), raw.data(), kBytes);
  return key;
}

SecretKey::SecretKey(SecretKey&& other) noexcept : bytes_(other.bytes_) { other.wipe(); }

SecretKey& SecretKey::operator=(SecretKey&& other) noexcept {
  if (this != &other) {
    bytes_ = other.bytes_;
    other.wipe();
  }
  return *this;
}

SecretKey::~SecretKey() { wipe(); }

void SecretKey::wipe() { OPENSSL_cleanse(bytes_.data(), bytes_.size()); }

}  // namespace outbox
