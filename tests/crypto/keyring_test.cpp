// Keyring files and environment variables: permissions, formats, and errors that
// name the key id but never the key.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fcntl.h>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "crypto_test_support.h"
#include "outbox/crypto_errors.h"
#include "test_env.h"
#include "test_text.h"

using namespace outbox;
using cryptotest::contains;

namespace {

// A keyring file with `text` and `mode`, removed on destruction.
struct TempKeyring {
  std::string path = "/tmp/" + testenv::unique_name("keyring") + ".yaml";
  TempKeyring(const std::string& text, mode_t mode) {
    std::ofstream(path) << text;
    REQUIRE(::chmod(path.c_str(), mode) == 0);
  }
  ~TempKeyring() { ::unlink(path.c_str()); }
};

// What the KeyringError `f` throws says; fails the test when it throws none.
std::string keyring_error(const std::function<void()>& f) { return testenv::error_of<KeyringError>(f); }

}  // namespace

TEST_CASE("a keyring file is refused unless its mode is 0600 or stricter") {
  auto keys = cryptotest::key_texts({"k1"});
  const auto text = cryptotest::keyring_yaml(keys, "k1");
  for (mode_t mode : {0644, 0640, 0604, 0660, 0601}) {
    CAPTURE(mode);
    TempKeyring file(text, mode);
    auto msg = keyring_error([&] { Keyring::load_file(file.path); });
    CHECK(contains(msg, file.path));
    CHECK(contains(msg, "0600 or stricter"));
    CHECK_FALSE(contains(msg, keys["k1"]));
  }
  for (mode_t mode : {0600, 0400}) {
    TempKeyring file(text, mode);
    auto ring = Keyring::load_file(file.path);
    CHECK(ring.active_id() == "k1");
  }
}

TEST_CASE("a key of the wrong length or format is an error naming the key id and never the key") {
  auto good = cryptotest::random_key_text();
  struct Case {
    std::string key_text, expected;
  };
  for (const auto& c :
       {Case{cryptotest::random_key_text(31), "got 31 bytes"}, Case{cryptotest::random_key_text(33), "got 33 bytes"},
        Case{cryptotest::random_key_text(16), "got 16 bytes"}, Case{good.substr(0, 43), "not valid base64"},
        Case{std::string(64, 'a') + "!", "not valid base64"},
        Case{"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "got 48 bytes"}}) {
    CAPTURE(c.expected);
    const auto yaml = "active: k1\nkeys:\n  k1: " + good + "\n  rotated-2024: " + c.key_text + "\n";
    auto msg = keyring_error([&] { Keyring::parse(yaml, "test.yaml"); });
    CHECK(contains(msg, "key 'rotated-2024'"));
    CHECK(contains(msg, c.expected));
    CHECK_FALSE(contains(msg, c.key_text));
    CHECK_FALSE(contains(msg, good));
  }
}

TEST_CASE("keyring settings are checked: active key listed, no unknown settings, ids well formed") {
  auto k = cryptotest::random_key_text();
  CHECK(contains(keyring_error([&] { Keyring::parse("active: k2\nkeys:\n  k1: " + k + "\n", "t"); }),
                 "'k2' is not one of the listed keys"));
  CHECK(contains(keyring_error([&] { Keyring::parse("keys:\n  k1: " + k + "\n", "t"); }), "active"));
  CHECK(contains(keyring_error([&] { Keyring::parse("active: k1\nkeys:\n  k1: " + k + "\nactiv: k1\n", "t"); }),
                 "unknown setting 'activ'"));
  // A key pasted where an id belongs is not echoed.
  auto pasted = keyring_error([&] { Keyring::parse("active: " + k + "\nkeys:\n  k1: " + k + "\n", "t"); });
  CHECK_FALSE(contains(pasted, k));
  auto as_id = keyring_error([&] { Keyring::parse("active: k1\nkeys:\n  k1: " + k + "\n  " + k + ": x\n", "t"); });
  CHECK_FALSE(contains(as_id, k));
  CHECK(contains(keyring_error([&] { Keyring::parse("active: k1\nkeys: {k1: [" + k + "]}\n", "t"); }), "key 'k1'"));
  CHECK(contains(keyring_error([&] { Keyring::parse("{{{", "t"); }), "not valid YAML"));
  // A rotation made by appending a second `active:` must not keep the first.
  CHECK(contains(keyring_error([&] {
                   Keyring::parse("active: k1\nkeys:\n  k1: " + k + "\n  k2: " + k + "\nactive: k2\n", "t");
                 }),
                 "setting 'active' given twice"));
  CHECK(contains(keyring_error([&] {
                   Keyring::parse("active: k1\nkeys:\n  k1: " + k +
                                      "\nblind_index: {active: b, active: c, "
                                      "keys: {b: " +
                                      cryptotest::random_key_text() + "}}\n",
                                  "t");
                 }),
                 "blind_index: setting 'active' given twice"));
  CHECK(contains(keyring_error([&] { Keyring::parse("active: k1\nkeys:\n  [a]: " + k + "\n", "t"); }), "malformed"));
}

TEST_CASE("a blind-index key must differ from every encryption key") {
  auto k = cryptotest::random_key_text();
  auto msg = keyring_error([&] {
    Keyring::parse("active: k1\nkeys: {k1: " + k + "}\nblind_index: {active: b1, keys: {b1: " + k + "}}\n", "t");
  });
  CHECK(contains(msg, "key 'b1'"));
  CHECK(contains(msg, "must differ"));
  CHECK_FALSE(contains(msg, k));
}

TEST_CASE("a keyring comes from an environment variable in flow style") {
  auto keys = cryptotest::key_texts({"k1", "k2"});
  const std::string var = "OUTBOX_TEST_KEYRING_" + std::to_string(::getpid());
  const std::string flow = "{active: k2, keys: {k1: " + keys["k1"] + ", k2: " + keys["k2"] + "}}";
  ::setenv(var.c_str(), flow.c_str(), 1);
  auto ring = Keyring::from_env(var);
  CHECK(ring.active_id() == "k2");
  CHECK(ring.find("k1") != nullptr);
  CHECK(ring.find("k3") == nullptr);
  ::unsetenv(var.c_str());
  CHECK(contains(keyring_error([&] { Keyring::from_env(var); }), "$" + var));
}

TEST_CASE("create_file writes a usable keyring with mode 0600 and never overwrites") {
  const std::string path = "/tmp/" + testenv::unique_name("newkeyring") + ".yaml";
  Keyring::create_file(path, "demo-1");
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  auto ring = Keyring::load_file(path);
  CHECK(ring.active_id() == "demo-1");
  CHECK(ring.has_index_keys());
  std::ifstream in(path);
  std::string before((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(contains(keyring_error([&] { Keyring::create_file(path, "demo-2"); }), "cannot create"));
  std::ifstream again(path);
  std::string after((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>());
  CHECK(before == after);
  ::unlink(path.c_str());
}

TEST_CASE("a keyring path that is a FIFO is refused at once by type, not waited on in open()") {
  const std::string path = "/tmp/" + testenv::unique_name("keyring_fifo");
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  // A writer that comes only after 3 s: without it a blocking open() would never
  // return; with it the test still ends, and the time says whether open() waited.
  std::thread late_writer([&] {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto msg = keyring_error([&] { Keyring::load_file(path); });
  const auto took = std::chrono::steady_clock::now() - t0;
  late_writer.join();
  ::unlink(path.c_str());
  CHECK(took < std::chrono::seconds(1));
  CHECK_MESSAGE(contains(msg, "it is a FIFO, not a regular file"), msg);
  CHECK(contains(msg, path));
}
