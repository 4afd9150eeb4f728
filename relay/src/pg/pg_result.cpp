#include "pg/pg_result.h"

#include "pg/pg_error.h"

#include <libpq-fe.h>

#include <cstdlib>
#include <cstring>

namespace relay {
namespace {

// Big-endian bytes of a fixed-size binary field, as an unsigned number.
std::uint64_t network_order(std::string_view b) {
  std::uint64_t v = 0;
  for (unsigned char c : b) v = v << 8 | c;
  return v;
}

}  // namespace

void PgResult::Deleter::operator()(pg_result* res) const { PQclear(res); }

PgResult::PgResult(pg_result* res) : res_(res) {}
PgResult::~PgResult() = default;
PgResult::PgResult(PgResult&&) noexcept = default;
PgResult& PgResult::operator=(PgResult&&) noexcept = default;

int PgResult::rows() const { return res_ ? PQntuples(res_.get()) : 0; }

int PgResult::columns() const { return res_ ? PQnfields(res_.get()) : 0; }

std::size_t PgResult::affected_rows() const {
  return res_ ? static_cast<std::size_t>(std::strtoull(PQcmdTuples(res_.get()), nullptr, 10)) : 0;
}

std::string PgResult::command_tag() const { return res_ ? PQcmdStatus(res_.get()) : ""; }

bool PgResult::is_null(int row, int column) const { return PQgetisnull(res_.get(), row, column) != 0; }

std::string_view PgResult::bytes(int row, int column) const {
  return {PQgetvalue(res_.get(), row, column), static_cast<std::size_t>(PQgetlength(res_.get(), row, column))};
}

std::string_view PgResult::fixed(int row, int column, std::size_t size, const char* what) const {
  const auto b = bytes(row, column);
  if (b.size() != size || is_null(row, column))
    throw PgError(PgError::Kind::kUsage, "column " + std::to_string(column) + ": not a binary " + what);
  return b;
}

std::int64_t PgResult::int8(int row, int column) const {
  return static_cast<std::int64_t>(network_order(fixed(row, column, 8, "bigint")));
}

std::int32_t PgResult::int4(int row, int column) const {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(network_order(fixed(row, column, 4, "integer"))));
}

double PgResult::float8(int row, int column) const {
  const std::uint64_t bits = network_order(fixed(row, column, 8, "double precision"));
  double v;
  std::memcpy(&v, &bits, sizeof v);  // IEEE 754 binary64, as PostgreSQL sends it
  return v;
}

bool PgResult::boolean(int row, int column) const { return fixed(row, column, 1, "boolean")[0] != 0; }

std::string PgResult::tid(int row, int column) const {
  const auto b = fixed(row, column, 6, "tid");
  const auto block = static_cast<std::uint32_t>(network_order(b.substr(0, 4)));
  const auto offset = static_cast<std::uint16_t>(network_order(b.substr(4, 2)));
  return "(" + std::to_string(block) + "," + std::to_string(offset) + ")";
}

int PgResult::column(const char* name) const {
  const int n = res_ ? PQfnumber(res_.get(), name) : -1;
  if (n < 0) throw PgError(PgError::Kind::kUsage, std::string("no column named ") + name + " in the result");
  return n;
}

}  // namespace relay
