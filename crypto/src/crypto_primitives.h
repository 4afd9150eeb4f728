#pragma once
// Internal: the OpenSSL EVP calls behind field encryption (AES-256-GCM with a
// 96-bit nonce and 128-bit tag, HMAC-SHA-256, strict base64). Not a public header:
// callers use Envelope, FieldEncryptor and FieldDecryptor.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "outbox/secret_key.h"

namespace outbox::crypto {

constexpr std::size_t kNonceBytes = 12;
constexpr std::size_t kTagBytes = 16;
using Nonce = std::array<std::uint8_t, kNonceBytes>;
using Tag = std::array<std::uint8_t, kTagBytes>;

// Random bytes from the OpenSSL CSPRNG (fork-safe in OpenSSL 3). Throws on failure.
void random_bytes(std::uint8_t* out, std::size_t n);

// AES-256-GCM. Returns the ciphertext (same length as the plaintext) and sets `tag`.
std::string gcm_seal(const SecretKey& key, const Nonce& nonce, std::string_view aad, std::string_view plaintext,
                     Tag& tag);
// Returns the plaintext, or nullopt when the tag does not verify (wrong key, nonce,
// AAD, ciphertext or tag). Never returns unauthenticated bytes.
std::optional<std::string> gcm_open(const SecretKey& key, const Nonce& nonce, std::string_view aad,
                                    std::string_view ciphertext, const Tag& tag);

// HMAC-SHA-256 of `data` under `key`.
std::array<std::uint8_t, 32> hmac_sha256(const SecretKey& key, std::string_view data);

// Standard base64 with padding (RFC 4648 section 4).
std::string base64_encode(std::string_view bytes);
// Strict: only the standard alphabet, length a multiple of 4, padding only at the
// end. Returns nullopt for anything else.
std::optional<std::string> base64_decode(std::string_view text);

// Appends a 4-byte big-endian length and then `field`: AAD built from such parts
// cannot be read two ways.
void append_length_prefixed(std::string& out, std::string_view field);

}  // namespace outbox::crypto
