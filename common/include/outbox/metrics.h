#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// Metrics: counters, gauges and histograms with labels, rendered in the Prometheus
// text exposition format 0.0.4 (what /metrics serves).

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace outbox::metrics {

// Label name/value pairs of one series, e.g. {{"reason", "nack"}}.
using Labels = std::vector<std::pair<std::string, std::string>>;

// A value that only goes up. Thread-safe (lock-free).
class Counter {
 public:
  // REQUIRES: by >= 0.
  void inc(double by = 1) { value_.fetch_add(by, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// A value that goes up and down. Thread-safe (lock-free).
class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void add(double by) { value_.fetch_add(by, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Counts observations into buckets with fixed upper bounds (le), plus their sum.
// Thread-safe: one short critical section per observation.
class Histogram {
 public:
  // REQUIRES: `upper_bounds` strictly increasing and finite; +Inf is implied.
  explicit Histogram(std::vector<double> upper_bounds);

  void observe(double value);

  struct Snapshot {
    std::vector<std::uint64_t> cumulative;  // one per bound, then +Inf (== count)
    double sum = 0;
    std::uint64_t count = 0;
  };
  Snapshot snapshot() const;
  const std::vector<double>& upper_bounds() const { return bounds_; }

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<std::uint64_t> counts_;  // per bucket (not cumulative), +Inf last
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

// Bucket bounds: `count` values from `start`, each `factor` times the previous.
std::vector<double> exponential_buckets(double start, double factor, int count);

// Holds every metric of a process and renders them. Metric and label names are
// checked against the Prometheus grammar; registering the same name with another
// type, help or bucket layout throws std::invalid_argument (a programming error).
// The same name and labels return the same object, so callers may look up freely.
//
// Thread safety: all methods may be called from any thread. Returned references
// stay valid for the registry's lifetime. Not copyable.
class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  Counter& counter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& gauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& histogram(const std::string& name, const std::string& help, const std::vector<double>& upper_bounds,
                       const Labels& labels = {});

  // The text exposition format: families in registration order, each with # HELP
  // and # TYPE, series in label order.
  std::string render() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Family {
    std::string name, help;
    Type type;
    std::vector<double> bounds;  // histograms
    std::map<Labels, std::unique_ptr<Counter>> counters;
    std::map<Labels, std::unique_ptr<Gauge>> gauges;
    std::map<Labels, std::unique_ptr<Histogram>> histograms;
  };
  Family& family(const std::string& name, const std::string& help, Type type, const Labels& labels,
                 const std::vector<double>& bounds);
  static void render_family(const Family& f, std::string& out);

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Family>> families_;  // registration order
};

}  // namespace outbox::metrics
