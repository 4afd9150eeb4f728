// BatchDeadline: a batch stops publishing, then commits, before PostgreSQL's
// idle-in-transaction timeout ends its session.
#include "policy/batch_deadline.h"

#include <doctest/doctest.h>

using relay::BatchDeadline;
using std::chrono::milliseconds;

TEST_CASE("with the defaults a batch publishes for 85 s and commits within 115 s of its last statement") {
  const BatchDeadline d(milliseconds(120000), milliseconds(30000));
  CHECK(d.commit_within() == milliseconds(115000));  // 5 s before the server's limit
  CHECK(d.publish_for() == milliseconds(85000));     // the last row published gets its full confirm timeout
}

TEST_CASE("a short idle timeout keeps a quarter of it as the margin") {
  const BatchDeadline d(milliseconds(3000), milliseconds(1000));
  CHECK(d.commit_within() == milliseconds(2250));
  CHECK(d.publish_for() == milliseconds(1250));
}

TEST_CASE("a confirm timeout close to the idle timeout still leaves half the time to publish") {
  const BatchDeadline d(milliseconds(3000), milliseconds(2900));
  CHECK(d.commit_within() == milliseconds(2250));
  CHECK(d.publish_for() == milliseconds(1125));
}

TEST_CASE("whatever the settings, publishing ends before the commit, and the commit before the server's limit") {
  for (int idle : {1000, 1001, 5000, 30000, 120000, 86400000})
    for (int confirm : {100, 999, 5000, 29999, 86399999}) {
      if (confirm >= idle) continue;
      const BatchDeadline d{milliseconds(idle), milliseconds(confirm)};
      CAPTURE(idle);
      CAPTURE(confirm);
      CHECK(d.publish_for() > milliseconds(0));
      CHECK(d.publish_for() < d.commit_within());
      CHECK(d.commit_within() < milliseconds(idle));
    }
}
