#include "policy/batch_deadline.h"

#include <algorithm>

namespace relay {

BatchDeadline::BatchDeadline(std::chrono::milliseconds idle_in_transaction, std::chrono::milliseconds confirm_timeout) {
  using std::chrono::milliseconds;
  // A quarter of the server's limit, at most 5 s: the loop looks at the clock at
  // least every 100 ms, but a send may block for a while (TCP_USER_TIMEOUT).
  const milliseconds margin = std::min(idle_in_transaction / 4, milliseconds(5000));
  commit_within_ = idle_in_transaction - margin;
  // Whatever is published last gets its full confirm timeout before the commit,
  // unless that leaves less than half the time to publish in (a timeout close to
  // the server's limit): then half, and its last rows get less.
  publish_for_ = std::max(commit_within_ - confirm_timeout, commit_within_ / 2);
}

}  // namespace relay
