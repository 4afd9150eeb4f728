#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// SchemaRegistry: the event schemas a producer or consumer knows, by event type.

#include <map>
#include <string>

#include "outbox/event_schema.h"

namespace outbox {

// Event schemas by type. Thread safety: build it once (load_directory, add), then
// share it as const between threads.
class SchemaRegistry {
 public:
  // Every *.yaml / *.yml file in `dir` (not recursive), one schema per file.
  // Throws ValidationError naming the file at fault, or two files declaring one type.
  static SchemaRegistry load_directory(const std::string& dir);

  // Throws ValidationError when a schema for the same type is already present.
  void add(EventSchema schema);
  // nullptr when no schema describes `type`.
  const EventSchema* find(const std::string& type) const;
  std::size_t size() const { return schemas_.size(); }

 private:
  std::map<std::string, EventSchema> schemas_;
};

}  // namespace outbox
