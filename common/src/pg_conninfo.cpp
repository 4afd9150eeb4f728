#include "outbox/pg_conninfo.h"

#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <memory>

namespace outbox {
namespace {

// The connection keywords libpq knows (host, password, sslmode, ...).
bool known_keyword(const std::string& name) {
  std::unique_ptr<PQconninfoOption, void (*)(PQconninfoOption*)> defaults(PQconndefaults(), PQconninfoFree);
  for (auto* o = defaults.get(); o && o->keyword; ++o)
    if (name == o->keyword) return true;
  return false;
}

// libpq names the offending part in double quotes. A name libpq calls invalid is
// shown only when it is one of its keywords: anything else may be a piece of a
// password that a space or a raw '?' split off (password=Xk9 mPq2=... reads as an
// option "mPq2"). Other quoted parts (a token of a URI, a whole URI) may hold the
// password too and are replaced by "...".
std::string without_values(const std::string& libpq_message) {
  std::string text = libpq_message;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  const bool option = text.rfind("invalid connection option", 0) == 0;
  if (option || text.rfind("invalid URI query parameter", 0) == 0) {
    const auto open = text.find('"'), close = text.rfind('"');
    if (open != std::string::npos && close > open && known_keyword(text.substr(open + 1, close - open - 1)))
      return text;
    return option ? "an unknown connection option (not shown: it may be part of a password; quote values "
                    "with spaces as key='value')"
                  : "an unknown URI query parameter (not shown: it may be part of a password; percent-encode "
                    "@, :, /, ?, # and % in the password)";
  }
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

// 'value' with backslash and quote escaped: libpq reads it back byte for byte.
std::string quoted_literal(const std::string& value) {
  std::string out = "'";
  for (char c : value) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  return out + "'";
}

bool space_at(const std::string& t, std::size_t i) {
  return i < t.size() && std::isspace(static_cast<unsigned char>(t[i]));
}

// The template being expanded: each scan_* starts at `i` and appends to `out`, with
// libpq's conninfo_parse rules (a backslash escapes the next byte in any value).
class TemplateScan {
 public:
  TemplateScan(const std::string& t, const std::function<std::string(const std::string&)>& lookup)
      : t_(t), lookup_(lookup) {}

  std::string keyword_form() {
    while (i_ < t_.size()) {
      if (space_at(t_, i_)) {
        out_ += t_[i_++];
        continue;
      }
      // A key (or a reference holding whole options: dsn: ${PG_DSN}) is inserted as is.
      while (i_ < t_.size() && t_[i_] != '=' && !space_at(t_, i_))
        out_ += reference() ? lookup_(name_) : std::string(1, t_[i_++]);
      while (space_at(t_, i_)) out_ += t_[i_++];
      if (i_ >= t_.size() || t_[i_] != '=') continue;  // libpq reports the missing '='
      out_ += t_[i_++];
      while (space_at(t_, i_)) out_ += t_[i_++];
      if (i_ < t_.size() && t_[i_] == '\'') quoted_value();
      else unquoted_value();
    }
    return out_;
  }

  std::string as_is() {
    while (i_ < t_.size()) out_ += reference() ? lookup_(name_) : std::string(1, t_[i_++]);
    return out_;
  }

 private:
  // At a ${NAME}: sets name_, moves past it, true.
  bool reference() {
    if (t_.compare(i_, 2, "${") != 0) return false;
    const auto end = t_.find('}', i_ + 2);
    if (end == std::string::npos) throw std::invalid_argument("unterminated ${ in value");
    name_ = t_.substr(i_ + 2, end - i_ - 2);
    i_ = end + 1;
    return true;
  }

  void unquoted_value() {
    const auto start = i_;
    std::string literal;
    bool expanded = false;
    while (i_ < t_.size() && !space_at(t_, i_)) {
      if (reference()) {
        literal += lookup_(name_);
        expanded = true;
      } else if (t_[i_] == '\\') {
        if (++i_ < t_.size()) literal += t_[i_++];
      } else {
        literal += t_[i_++];
      }
    }
    // Quoted only when it must be, so a plain secret leaves the string as written.
    const bool plain = !literal.empty() && std::none_of(literal.begin(), literal.end(), [](char c) {
      return c == '\'' || c == '\\' || std::isspace(static_cast<unsigned char>(c));
    });
    out_ += !expanded ? t_.substr(start, i_ - start) : plain ? literal : quoted_literal(literal);
  }

  void quoted_value() {
    out_ += t_[i_++];
    while (i_ < t_.size()) {
      if (reference()) {
        const auto text = lookup_(name_);
        if (!stays_quoted(text))
          throw std::invalid_argument(
              "${" + name_ +
              "} is inside a quoted value and its text holds an unescaped ' or ends in a lone \\; "
              "write it unquoted (password=${" +
              name_ + "}) and the relay quotes it");
        out_ += text;
      } else if (t_[i_] == '\\') {
        out_ += t_.substr(i_, 2);
        i_ += 2;
      } else if (t_[i_] == '\'') {
        out_ += t_[i_++];
        return;
      } else {
        out_ += t_[i_++];
      }
    }
  }

  // Whether `text` between quotes leaves them open: every ' and \ escaped.
  static bool stays_quoted(const std::string& text) {
    for (std::size_t k = 0; k < text.size(); ++k) {
      if (text[k] == '\'') return false;
      if (text[k] == '\\' && ++k == text.size()) return false;
    }
    return true;
  }

  const std::string& t_;
  const std::function<std::string(const std::string&)>& lookup_;
  std::size_t i_ = 0;
  std::string name_;
  std::string out_;
};

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
  for (const auto& [key, value] : params_) out += (out.empty() ? "" : " ") + key + "=" + quoted_literal(value);
  return out;
}

std::string expand_conninfo_template(const std::string& tmpl,
                                     const std::function<std::string(const std::string& name)>& lookup) {
  TemplateScan scan(tmpl, lookup);
  const bool uri = tmpl.rfind("postgresql://", 0) == 0 || tmpl.rfind("postgres://", 0) == 0;
  return uri ? scan.as_is() : scan.keyword_form();
}

}  // namespace outbox
