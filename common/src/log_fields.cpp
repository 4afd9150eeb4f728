#include "outbox/log_fields.h"

#include "outbox/json_log.h"
#include "outbox/one_line.h"

namespace outbox {
namespace {

std::vector<LogField>& fields_of_this_thread() {
  thread_local std::vector<LogField> fields;
  return fields;
}

}  // namespace

LogField::LogField(std::string_view name, std::string_view text)
    : name_(name), json_("\"" + json_escaped(one_line(text)) + "\"") {}

LogFields::LogFields(std::initializer_list<LogField> fields) : restore_size_(fields_of_this_thread().size()) {
  auto& all = fields_of_this_thread();
  all.insert(all.end(), fields.begin(), fields.end());
}

LogFields::~LogFields() {
  auto& all = fields_of_this_thread();
  all.erase(all.begin() + static_cast<std::ptrdiff_t>(restore_size_), all.end());
}

const std::vector<LogField>& LogFields::current() { return fields_of_this_thread(); }

}  // namespace outbox
