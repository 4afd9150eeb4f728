#include "outbox/schema_registry.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <vector>

#include "outbox/errors.h"

namespace outbox {

SchemaRegistry SchemaRegistry::load_directory(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw ValidationError("event schema directory " + dir, "not a directory");
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    // Any case (Signup.YAML, Refund.Yml): a schema skipped for its name's case would
    // let its type through unchecked and its sensitive fields in clear.
    std::string ext = entry.path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    if (entry.is_regular_file() && (ext == ".yaml" || ext == ".yml")) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());  // deterministic: duplicate errors name the same file each run
  SchemaRegistry registry;
  for (const auto& f : files) registry.add(EventSchema::load_file(f.string()));
  return registry;
}

void SchemaRegistry::add(EventSchema schema) {
  const std::string type = schema.type();
  if (!schemas_.emplace(type, std::move(schema)).second)
    throw ValidationError("event schema " + type, "two schemas declare this event type");
}

const EventSchema* SchemaRegistry::find(const std::string& type) const {
  auto it = schemas_.find(type);
  return it == schemas_.end() ? nullptr : &it->second;
}

}  // namespace outbox
