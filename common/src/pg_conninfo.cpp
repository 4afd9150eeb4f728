#include "outbox/pg_conninfo.h"

#include <libpq-fe.h>

#include <memory>

namespace outbox {
namespace {

// libpq names the offending part in double quotes. Option and query-parameter
// names are keys and stay; anything else (a token of a URI, a whole URI) may hold
// the password and is replaced by "...".
std::string without_values(const std::string& libpq_message) {
  std::string text = libpq_message;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  const bool names_a_key = text.rfind("invalid connection option", 0) == 0 ||
                           text.rfind("invalid URI query parameter", 0) == 0;
  if (names_a_key) return text;
  std::string out;
  bool quoted = false;
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '"') {
      if (!quoted) out += text[i];
      continue;
    }
    if (!quoted) {
      quoted = true;
      start = i + 1;
      continue;
    }
    quoted = false;
    const auto value = text.substr(start, i - start);
    out += value == "=" || value == "]" ? "\"" + value + "\"" : "\"...\"";
  }
  return out;
}

}  // namespace

PgConnInfo PgConnInfo::parse(const std::string& dsn) {
  char* error = nullptr;
  std::unique_ptr<PQconninfoOption, void (*)(PQconninfoOption*)> options(PQconninfoParse(dsn.c_str(), &error),
                                                                         PQconninfoFree);
  if (!options) {
    std::string why = error ? without_values(error) : "out of memory";
    if (error) PQfreemem(error);
    throw std::invalid_argument(why);
  }
  PgConnInfo info;
  info.uri_ = dsn.rfind("postgresql://", 0) == 0 || dsn.rfind("postgres://", 0) == 0;
  for (auto* o = options.get(); o->keyword; ++o)
    if (o->val) info.params_.emplace_back(o->keyword, o->val);
  return info;
}

std::optional<std::string> PgConnInfo::get(const std::string& keyword) const {
  for (const auto& [key, value] : params_)
    if (key == keyword) return value;
  return std::nullopt;
}

void PgConnInfo::set(const std::string& keyword, const std::string& value) {
  for (auto& [key, v] : params_)
    if (key == keyword) {
      v = value;
      return;
    }
  params_.emplace_back(keyword, value);
}

void PgConnInfo::set_default(const std::string& keyword, const std::string& value) {
  if (!get(keyword)) params_.emplace_back(keyword, value);
}

std::string PgConnInfo::to_string() const {
  std::string out;
  for (const auto& [key, value] : params_) {
    if (!out.empty()) out += ' ';
    out += key + "='";
    for (char c : value) {
      if (c == '\\' || c == '\'') out += '\\';
      out += c;
    }
    out += '\'';
  }
  return out;
}

}  // namespace outbox
