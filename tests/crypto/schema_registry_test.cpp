// SchemaRegistry::load_directory: which files of a directory become schemas.
#include "outbox/schema_registry.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "outbox/errors.h"

using namespace outbox;
namespace fs = std::filesystem;

namespace {

// A fresh directory under the system's temporary directory, removed at scope exit.
struct TempDir {
  fs::path path = fs::temp_directory_path() /
                  ("outbox-schemas-" + std::to_string(getpid()) + "-" + std::to_string(std::random_device{}()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  void write(const std::string& file, const std::string& text) const { std::ofstream(path / file) << text; }
};

std::string sensitive_email_schema(const std::string& type) {
  return "x-event-type: " + type + "\ntype: object\nrequired: [email]\n" +
         "properties:\n  email: {type: string, x-gdpr-sensitive: true}\n";
}

}  // namespace

TEST_CASE("a schema file whose extension is in capitals (Signup.YAML, Refund.Yml) is loaded, not skipped") {
  // Skipped, its type would pass unchecked and its sensitive fields in clear.
  TempDir dir;
  dir.write("Signup.YAML", sensitive_email_schema("Signup"));
  dir.write("Refund.Yml", sensitive_email_schema("Refund"));
  dir.write("Order.yaml", sensitive_email_schema("Order"));
  dir.write("README.txt", "not a schema");
  const auto registry = SchemaRegistry::load_directory(dir.path.string());
  CHECK(registry.size() == 3);
  for (const std::string type : {"Signup", "Refund", "Order"}) {
    const EventSchema* schema = registry.find(type);
    REQUIRE_MESSAGE(schema, type);
    CHECK(schema->has_sensitive_fields());
  }
}

TEST_CASE("two schema files that differ only in the case of their extension declaring one type are refused") {
  TempDir dir;
  dir.write("Signup.yaml", sensitive_email_schema("Signup"));
  dir.write("Signup.YAML", sensitive_email_schema("Signup"));
  CHECK_THROWS_WITH_AS(SchemaRegistry::load_directory(dir.path.string()),
                       doctest::Contains("two schemas declare this event type"), ValidationError);
}
