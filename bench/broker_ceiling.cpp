// The broker ceiling: what rabbitmq-c and the broker do with nothing else in the way.
#include <unistd.h>

#include <chrono>
#include <vector>

#include "measurements.h"
#include "outbox/message_id.h"
#include "process_cpu.h"
#include "tag_counter.h"

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

CeilingResult measure_broker_ceiling(BenchEnv& env, int bytes, long count, const WireShape& shape) {
  constexpr std::uint64_t kWindow = 1024;
  const auto kConfirmTimeout = std::chrono::seconds(30);
  AmqpBenchClient client(env.amqp_uri());
  client.confirm_select();
  const std::string body = BenchEnv::random_payload(bytes);
  TagCounter tags;
  auto next = [&](std::chrono::milliseconds timeout) {
    auto c = client.next_confirm(timeout);
    if (c) tags.settle(*c);
    return c.has_value();
  };
  const auto broker = broker_pid();
  const double broker_cpu0 = broker ? process_cpu_seconds(*broker).value_or(0) : 0;
  const double client_cpu0 = process_cpu_seconds(getpid()).value_or(0);
  const auto start = Clock::now();
  std::int64_t n = 0;
  while (n < count) {
    while (tags.outstanding() >= kWindow)
      if (!next(kConfirmTimeout)) throw BenchError("broker ceiling: no confirm within 30 s");
    client.publish(shape.default_exchange ? "" : env.exchange(),
                   shape.default_exchange ? env.queue() : env.routing_key(),
                   outbox::MessageId::generate_v7().to_string(), ++n, body, shape);
    tags.published();
    if (n % 64 == 0)
      while (next(std::chrono::milliseconds(0))) {
      }
  }
  while (tags.outstanding() > 0)
    if (!next(kConfirmTimeout)) throw BenchError("broker ceiling: no confirm within 30 s");
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  if (tags.nacked() > 0) throw BenchError("broker ceiling: the broker nacked " + std::to_string(tags.nacked()));
  const double n_msgs = static_cast<double>(tags.settled());
  CeilingResult r;
  r.msgs_per_s = n_msgs / elapsed;
  if (broker) r.broker_cpu_us_per_msg = (process_cpu_seconds(*broker).value_or(0) - broker_cpu0) * 1e6 / n_msgs;
  r.client_cpu_us_per_msg = (process_cpu_seconds(getpid()).value_or(0) - client_cpu0) * 1e6 / n_msgs;
  env.purge_queue();
  return r;
}

}  // namespace bench
