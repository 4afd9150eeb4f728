#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// SecretKey: 32 bytes of AES-256 / HMAC-SHA-256 key material.

#include <array>
#include <cstdint>
#include <string_view>

namespace outbox {

// Holds one 256-bit key and wipes it (OPENSSL_cleanse) when destroyed or moved
// from, so key bytes do not linger in freed memory. Move-only: a key is never
// copied by accident. Never printed: there is no conversion to text.
// Thread safety: const methods are safe to call from any thread.
class SecretKey {
 public:
  static constexpr std::size_t kBytes = 32;

  // A fresh key from the OpenSSL CSPRNG. Throws std::runtime_error if it fails.
  static SecretKey random();
  // REQUIRES: raw.size() == kBytes (throws std::invalid_argument otherwise,
  // without echoing the bytes).
  static SecretKey from_bytes(std::string_view raw);

  SecretKey(SecretKey&& other) noexcept;
  SecretKey& operator=(SecretKey&& other) noexcept;
  SecretKey(const SecretKey&) = delete;
  SecretKey& operator=(const SecretKey&) = delete;
  ~SecretKey();

  const std::uint8_t* data() const { return bytes_.data(); }

 private:
  SecretKey() = default;
  void wipe();
  std::array<std::uint8_t, kBytes> bytes_{};
};

}  // namespace outbox
