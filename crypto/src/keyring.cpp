#include "outbox/keyring.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>

#include "crypto_primitives.h"
#include "outbox/bounded_read.h"
#include "outbox/crypto_errors.h"

namespace outbox {
namespace {

constexpr std::size_t kMaxKeyringBytes = 1024 * 1024;

// Text that wipes itself: the keyring file's contents hold every key.
struct WipedString {
  std::string text;
  ~WipedString() { OPENSSL_cleanse(text.data(), text.size()); }
};

std::string mode_text(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

std::string line_of(const YAML::Node& node) {
  return node.Mark().is_null() ? "" : " (line " + std::to_string(node.Mark().line + 1) + ")";
}

// Also refuses a setting given twice: yaml-cpp's map[key] finds only the first, so a
// rotation made by appending `active: k2` would keep encrypting under the old key.
void reject_unknown(const YAML::Node& map, std::initializer_list<const char*> allowed, const std::string& where) {
  std::set<std::string> seen;
  for (const auto& kv : map) {
    const auto name = kv.first.as<std::string>();
    if (!seen.insert(name).second)
      throw KeyringError(where, "setting '" + name + "' given twice; each may appear once" + line_of(kv.first));
    bool known = false;
    for (const char* a : allowed) known = known || name == a;
    if (!known)
      throw KeyringError(where, (Keyring::valid_key_id(name) ? "unknown setting '" + name + "'" : "unknown setting") +
                                    line_of(kv.first));
  }
}

SecretKey decode_key(const YAML::Node& value, const std::string& where) {
  if (!value.IsScalar()) throw KeyringError(where, "expected base64 of 32 bytes" + line_of(value));
  WipedString text{value.Scalar()};
  auto raw = crypto::base64_decode(text.text);
  if (!raw) throw KeyringError(where, "not valid base64 (expected base64 of 32 bytes)" + line_of(value));
  WipedString bytes{std::move(*raw)};
  if (bytes.text.size() != SecretKey::kBytes)
    throw KeyringError(where, "expected base64 of 32 bytes, got " + std::to_string(bytes.text.size()) + " bytes" +
                                  line_of(value));
  return SecretKey::from_bytes(bytes.text);
}

// Parses {active: ID, keys: {ID: base64, ...}} into `keys` and returns the active id.
std::string parse_key_set(const YAML::Node& node, const std::string& where, std::map<std::string, SecretKey>& keys) {
  if (!node.IsMap()) throw KeyringError(where, "expected a mapping with 'active' and 'keys'" + line_of(node));
  const auto list = node["keys"];
  if (!list || !list.IsMap() || list.size() == 0)
    throw KeyringError(where + ": keys", "expected a non-empty mapping of key id to base64 key");
  for (const auto& kv : list) {
    const auto id = kv.first.as<std::string>();
    // An invalid id is not echoed: it may be a key pasted in the wrong place.
    if (!Keyring::valid_key_id(id))
      throw KeyringError(where + ": keys", "a key id is not 1-64 of [A-Za-z0-9._-]" + line_of(kv.first));
    const std::string key_where = where + ": key '" + id + "'";
    if (keys.count(id)) throw KeyringError(key_where, "listed twice" + line_of(kv.first));
    keys.emplace(id, decode_key(kv.second, key_where));
  }
  const auto active = node["active"];
  if (!active || !active.IsScalar())
    throw KeyringError(where + ": active", "required: the id of the key that encrypts");
  const auto id = active.Scalar();
  if (!Keyring::valid_key_id(id))
    throw KeyringError(where + ": active", "not a key id (1-64 of [A-Za-z0-9._-])" + line_of(active));
  if (!keys.count(id)) throw KeyringError(where + ": active", "'" + id + "' is not one of the listed keys");
  return id;
}

}  // namespace

bool Keyring::valid_key_id(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-'))
      return false;
  return true;
}

Keyring Keyring::parse(const std::string& yaml, const std::string& source) {
  const std::string where = "keyring " + source;
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    // e.msg is the parser's reason (no document text); the mark gives the line.
    throw KeyringError(where, "not valid YAML: " + e.msg + " (line " + std::to_string(e.mark.line + 1) + ")");
  }
  if (!root.IsMap()) throw KeyringError(where, "expected a mapping with 'active' and 'keys'");
  Keyring ring;
  try {
    reject_unknown(root, {"active", "keys", "blind_index"}, where);
    ring.active_ = parse_key_set(root, where, ring.keys_);
    if (const auto index = root["blind_index"]) {
      if (index.IsMap()) reject_unknown(index, {"active", "keys"}, where + ": blind_index");
      ring.index_active_ = parse_key_set(index, where + ": blind_index", ring.index_keys_);
    }
  } catch (const YAML::Exception& e) {  // e.g. a list where a name belongs; e.msg holds no document text
    throw KeyringError(where, "malformed: " + e.msg + " (line " + std::to_string(e.mark.line + 1) + ")");
  }
  for (const auto& [index_id, index_key] : ring.index_keys_)
    for (const auto& [id, key] : ring.keys_)
      if (CRYPTO_memcmp(index_key.data(), key.data(), SecretKey::kBytes) == 0)
        throw KeyringError(where + ": blind_index: key '" + index_id + "'",
                           "must differ from encryption key '" + id + "'");
  return ring;
}

Keyring Keyring::load_file(const std::string& path) {
  const std::string where = "keyring " + path;
  // Opened without blocking and checked by type first: a FIFO or a device given by
  // mistake is refused at once instead of hanging the tool (outbox/bounded_read.h).
  const auto read = read_bounded(path, kMaxKeyringBytes);
  if (!read.ok()) throw KeyringError(where, read.why(kMaxKeyringBytes));
  // Checked on the descriptor we read from, so the file cannot be swapped in between.
  if ((read.mode & 077) != 0)
    throw KeyringError(where, "mode " + mode_text(read.mode) +
                                  " lets other users read the keys; it must be 0600 or stricter (chmod 600 " + path +
                                  ")");
  return parse(read.text, path);
}

Keyring Keyring::from_env(const std::string& variable) {
  const char* value = std::getenv(variable.c_str());
  if (!value || !*value) throw KeyringError("keyring $" + variable, "the environment variable is not set");
  return parse(value, "$" + variable);
}

void Keyring::create_file(const std::string& path, const std::string& key_id) {
  const std::string where = "keyring " + path;
  if (!valid_key_id(key_id)) throw KeyringError(where, "key ids are 1-64 of [A-Za-z0-9._-]");
  const std::string index_id = key_id == "b1" ? "b2" : "b1";
  auto key = SecretKey::random();
  auto index_key = SecretKey::random();
  auto b64 = [](const SecretKey& k) {
    return crypto::base64_encode(std::string_view(reinterpret_cast<const char*>(k.data()), SecretKey::kBytes));
  };
  WipedString text{
      "# outbox keyring: keep mode 0600. Rotate by adding a key and making it active.\n"
      "active: " +
      key_id + "\nkeys:\n  " + key_id + ": " + b64(key) + "\nblind_index:\n  active: " + index_id + "\n  keys:\n    " +
      index_id + ": " + b64(index_key) + "\n"};
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) throw KeyringError(where, std::string("cannot create: ") + std::strerror(errno));
  bool ok = ::fchmod(fd, 0600) == 0;  // exactly 0600 whatever the umask
  for (std::size_t done = 0; ok && done < text.text.size();) {
    ssize_t n = ::write(fd, text.text.data() + done, text.text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<std::size_t>(n);
  }
  ok = ::fsync(fd) == 0 && ok;
  ::close(fd);
  if (!ok) {
    ::unlink(path.c_str());
    throw KeyringError(where, "cannot write the new keyring");
  }
}

const SecretKey* Keyring::find(const std::string& id) const {
  auto it = keys_.find(id);
  return it == keys_.end() ? nullptr : &it->second;
}

const SecretKey* Keyring::find_index_key(const std::string& id) const {
  auto it = index_keys_.find(id);
  return it == index_keys_.end() ? nullptr : &it->second;
}

std::vector<std::string> Keyring::key_ids() const {
  std::vector<std::string> ids;
  for (const auto& kv : keys_) ids.push_back(kv.first);
  return ids;
}

}  // namespace outbox
