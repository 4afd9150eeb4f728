#pragma once
// Where the files a message cites are. The Debian package installs docs/*.md under
// /usr/share/doc/outbox-relay (compressed, as Debian ships documents: OPERATIONS.md.gz)
// and schema/roles.sql as /usr/share/outbox-relay/roles.sql; a source tree has them
// in docs/ and schema/. Messages name the document and its folder, true for both.

namespace relay {

inline constexpr const char* kDocsWhere = "in /usr/share/doc/outbox-relay, or docs/ in the source";
inline constexpr const char* kRolesSqlWhere = "/usr/share/outbox-relay/roles.sql, or schema/roles.sql in the source";

}  // namespace relay
