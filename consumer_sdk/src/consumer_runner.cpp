#include "outbox/consumer_runner.h"

#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <mutex>
#include <thread>

#include "consumer_worker.h"
#include "outbox/errors.h"
#include "outbox/one_line.h"
#include "shared_state.h"

namespace outbox {

struct ConsumerRunner::State {
  RunnerOptions options;
  Handler handler;
  detail::SharedState shared{options, handler};
  std::vector<std::unique_ptr<detail::ConsumerWorker>> workers;
  std::vector<std::thread> threads;
  std::mutex lifecycle;  // start/wait
};

ConsumerRunner::ConsumerRunner(RunnerOptions options, Handler handler) : state_(std::make_unique<State>()) {
  validate_runner_options(options);
  if (!handler) throw ValidationError("handler", "is required");
  if (options.dead_letter_queue.empty())
    options.dead_letter_queue = options.queue + std::string(kDeadLetterQueueSuffix);
  state_->options = std::move(options);
  state_->handler = std::move(handler);
  const auto& o = state_->options;
  if (o.dedup == Deduplication::kInbox) state_->shared.inbox.emplace(InboxOptions{o.schema, o.consumer});
  if (o.retention) state_->shared.retention.emplace(o.schema, *o.retention);
  if (o.sequence_guard) {
    state_->shared.guard.emplace(SequenceGuardOptions{o.schema, o.consumer});
    state_->shared.held.emplace(o.schema, o.consumer);
  }
  auto& shared = state_->shared;
  shared.registry = o.metrics ? o.metrics : std::make_shared<outbox::metrics::Registry>();
  shared.metrics.emplace(*shared.registry, o.consumer.value());
}

ConsumerRunner::~ConsumerRunner() {
  stop();
  wait();
}

void ConsumerRunner::declare_topology() {
  const auto& o = state_->options;
  auto settings = detail::amqp_settings(o, "outbox-consumer " + o.consumer.value() + " setup");
  settings.heartbeat_s = 0;  // a short-lived connection
  detail::AmqpConsumer setup(std::move(settings));
  setup.connect();
  detail::Topology topology{o.queue, {}, o.dead_letter_exchange, o.dead_letter_queue, o.queue_type, o.delivery_limit};
  for (const auto& b : o.bindings) topology.bindings.push_back({b.exchange, b.routing_key, b.exchange_type});
  setup.declare(topology);
}

void ConsumerRunner::start() {
  std::lock_guard lock(state_->lifecycle);
  if (!state_->threads.empty()) throw std::logic_error("ConsumerRunner::start called twice");
  const auto& o = state_->options;
  declare_topology();
  // Connect everything before any thread starts, so a bad setting fails here.
  std::vector<std::unique_ptr<detail::ConsumerWorker>> workers;
  for (int i = 0; i < o.concurrency; ++i) {
    workers.push_back(std::make_unique<detail::ConsumerWorker>(state_->shared, i));
    workers.back()->connect();
  }
  state_->workers = std::move(workers);
  for (auto& w : state_->workers) state_->threads.emplace_back([worker = w.get()] { worker->run(); });
  spdlog::info("consumer {}: {} worker(s) consuming queue '{}' (prefetch {}, {}), {} PostgreSQL connection(s)",
               o.consumer.value(), o.concurrency, one_line(o.queue, 255), o.prefetch,
               o.dedup == Deduplication::kInbox ? "inbox deduplication" : "handler deduplication", o.concurrency);
  if (o.sequence_guard)
    spdlog::info("consumer {}: sequence guard on: each key's events applied once and in order", o.consumer.value());
}

void ConsumerRunner::stop() { state_->shared.stop.set(); }

bool ConsumerRunner::stopping() const { return state_->shared.stop.is_set(); }

void ConsumerRunner::wait() {
  std::lock_guard lock(state_->lifecycle);
  for (auto& t : state_->threads)
    if (t.joinable()) t.join();
}

int ConsumerRunner::run_until_signal() {
  boost::asio::io_context io;
  boost::asio::signal_set signals(io, SIGTERM, SIGINT);
  int caught = 0;
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    caught = sig;
    spdlog::info("consumer {}: signal {} received, finishing in-flight messages", state_->options.consumer.value(),
                 sig);
    stop();
  });
  start();
  while (!stopping()) io.run_for(std::chrono::milliseconds(100));
  wait();
  return caught;
}

const ConsumerCounters& ConsumerRunner::counters() const { return state_->shared.metrics->counters(); }

SequenceStatus ConsumerRunner::sequence_status() const {
  std::lock_guard lock(state_->shared.sequence_status_mutex);
  return state_->shared.sequence_status;
}

metrics::Registry& ConsumerRunner::metrics() const { return *state_->shared.registry; }

const RunnerOptions& ConsumerRunner::options() const { return state_->options; }

}  // namespace outbox
