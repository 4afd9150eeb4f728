#include "crypto_primitives.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <memory>
#include <stdexcept>

namespace outbox::crypto {
namespace {

using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

// Fetched once: OpenSSL 3's implicit fetch by EVP_aes_256_gcm() on every init costs
// a provider lookup each time. Lives for the whole process.
const EVP_CIPHER* aes_256_gcm() {
  static EVP_CIPHER* cipher = EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr);
  if (!cipher) throw std::runtime_error("OpenSSL has no AES-256-GCM");
  return cipher;
}

// One context per thread, reused: allocating one per field costs more than the
// encryption of a short value. Reset (wiping the key schedule) after every use.
class ThreadCtx {
 public:
  ThreadCtx() {
    thread_local CipherCtx ctx(EVP_CIPHER_CTX_new(), &EVP_CIPHER_CTX_free);
    if (!ctx) throw std::runtime_error("EVP_CIPHER_CTX_new failed");
    ctx_ = ctx.get();
  }
  ~ThreadCtx() { EVP_CIPHER_CTX_reset(ctx_); }
  ThreadCtx(const ThreadCtx&) = delete;
  ThreadCtx& operator=(const ThreadCtx&) = delete;
  EVP_CIPHER_CTX* get() const { return ctx_; }

 private:
  EVP_CIPHER_CTX* ctx_;
};

void require(int ok, const char* what) {
  if (ok != 1) throw std::runtime_error(std::string("OpenSSL ") + what + " failed");
}

const unsigned char* bytes(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

bool is_base64_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

}  // namespace

void random_bytes(std::uint8_t* out, std::size_t n) {
  if (RAND_bytes(out, static_cast<int>(n)) != 1) throw std::runtime_error("RAND_bytes failed");
}

std::string gcm_seal(const SecretKey& key, const Nonce& nonce, std::string_view aad, std::string_view plaintext,
                     Tag& tag) {
  ThreadCtx ctx;
  // The default GCM IV length is 96 bits, the one NIST recommends; no ctrl needed.
  require(EVP_EncryptInit_ex(ctx.get(), aes_256_gcm(), nullptr, key.data(), nonce.data()), "EVP_EncryptInit_ex");
  int len = 0;
  if (!aad.empty())
    require(EVP_EncryptUpdate(ctx.get(), nullptr, &len, bytes(aad), static_cast<int>(aad.size())),
            "EVP_EncryptUpdate(aad)");
  std::string out(plaintext.size(), '\0');
  auto* dst = reinterpret_cast<unsigned char*>(out.data());
  require(EVP_EncryptUpdate(ctx.get(), dst, &len, bytes(plaintext), static_cast<int>(plaintext.size())),
          "EVP_EncryptUpdate");
  int tail = 0;
  require(EVP_EncryptFinal_ex(ctx.get(), dst + len, &tail), "EVP_EncryptFinal_ex");
  require(EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes, tag.data()), "GCM get tag");
  return out;
}

std::optional<std::string> gcm_open(const SecretKey& key, const Nonce& nonce, std::string_view aad,
                                    std::string_view ciphertext, const Tag& tag) {
  ThreadCtx ctx;
  require(EVP_DecryptInit_ex(ctx.get(), aes_256_gcm(), nullptr, key.data(), nonce.data()), "EVP_DecryptInit_ex");
  int len = 0;
  if (!aad.empty())
    require(EVP_DecryptUpdate(ctx.get(), nullptr, &len, bytes(aad), static_cast<int>(aad.size())),
            "EVP_DecryptUpdate(aad)");
  std::string out(ciphertext.size(), '\0');
  auto* dst = reinterpret_cast<unsigned char*>(out.data());
  require(EVP_DecryptUpdate(ctx.get(), dst, &len, bytes(ciphertext), static_cast<int>(ciphertext.size())),
          "EVP_DecryptUpdate");
  Tag expected = tag;
  require(EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, expected.data()), "GCM set tag");
  int tail = 0;
  if (EVP_DecryptFinal_ex(ctx.get(), dst + len, &tail) != 1) {
    OPENSSL_cleanse(out.data(), out.size());  // unauthenticated: never hand it out
    return std::nullopt;
  }
  return out;
}

std::array<std::uint8_t, 32> hmac_sha256(const SecretKey& key, std::string_view data) {
  std::array<std::uint8_t, 32> mac{};
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(SecretKey::kBytes), bytes(data), data.size(), mac.data(),
            &len) ||
      len != mac.size())
    throw std::runtime_error("OpenSSL HMAC failed");
  return mac;
}

std::string base64_encode(std::string_view in) {
  std::string out(4 * ((in.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes(in), static_cast<int>(in.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::size_t padding = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '=') {
      if (i + 2 < text.size()) return std::nullopt;  // at most two, only at the end
      ++padding;
    } else if (padding > 0 || !is_base64_char(c)) {
      return std::nullopt;
    }
  }
  std::string out(text.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes(text), static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  out.resize(static_cast<std::size_t>(n) - padding);  // DecodeBlock counts padding as zero bytes
  return out;
}

void append_length_prefixed(std::string& out, std::string_view field) {
  auto n = static_cast<std::uint32_t>(field.size());
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((n >> shift) & 0xFF));
  out.append(field);
}

}  // namespace outbox::crypto
