#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// LogFields: named fields (message_id, row_id, reason, attempt, consumer...) for
// the log lines a thread writes while they are in scope, so a log pipeline can
// filter on them; the JSON log format (json_log.h) writes them beside "msg".

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace outbox {

// One field: a name and its value, already as JSON (a number, or a string whose
// text went through one_line: no control bytes, capped at 1000 bytes). Values are
// copied: a field never outlives what it names. Like a log message, a field must
// hold no secret and no payload (pass error texts that were scrubbed, as they are
// for messages).
class LogField {
 public:
  LogField(std::string_view name, std::string_view text);
  LogField(std::string_view name, const std::string& text) : LogField(name, std::string_view(text)) {}
  LogField(std::string_view name, const char* text) : LogField(name, std::string_view(text)) {}
  template <class Int, std::enable_if_t<std::is_integral_v<Int> && !std::is_same_v<Int, bool>, int> = 0>
  LogField(std::string_view name, Int number) : name_(name), json_(std::to_string(number)) {}

  const std::string& name() const { return name_; }
  const std::string& json() const { return json_; }

 private:
  std::string name_, json_;
};

// Adds fields to every log line the calling thread writes until the object is
// destroyed (scopes nest; an inner field of the same name wins). Only synchronous
// loggers see them: they are read by the formatter on the logging thread.
//
// Thread safety: thread-local; construct and destroy on one thread, in LIFO order
// (a scope object). Not copyable.
class LogFields {
 public:
  LogFields(std::initializer_list<LogField> fields);
  ~LogFields();
  LogFields(const LogFields&) = delete;
  LogFields& operator=(const LogFields&) = delete;

  // The calling thread's fields in scope, outermost first.
  static const std::vector<LogField>& current();

 private:
  std::size_t restore_size_;
};

}  // namespace outbox
