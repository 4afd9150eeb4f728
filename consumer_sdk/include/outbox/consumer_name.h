#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// ConsumerName: which consumer an inbox row belongs to.

#include <string>

#include "outbox/types.h"

namespace outbox {

// The name a consumer deduplicates under, e.g. "billing". Two consumers of one
// message keep separate inbox rows, so they never skip each other's work.
using ConsumerName = StrongType<struct ConsumerNameTag>;

// Throws ValidationError naming `field` unless `name` is 1-200 characters of
// [A-Za-z0-9_.:-] (it appears in logs and metric labels). Pure; thread-safe.
void validate_consumer_name(const ConsumerName& name, const std::string& field = "consumer");

}  // namespace outbox
