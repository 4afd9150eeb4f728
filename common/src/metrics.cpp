#include "outbox/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace outbox::metrics {
namespace {

bool valid_name(const std::string& name, bool allow_colon) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':') ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

void check_labels(const std::string& metric, const Labels& labels) {
  for (const auto& [name, value] : labels) {
    (void)value;
    // "le" belongs to histogram buckets; "__" prefixes are reserved by Prometheus.
    if (!valid_name(name, false) || name == "le" || name.rfind("__", 0) == 0)
      throw std::invalid_argument("metric " + metric + ": invalid label name '" + name + "'");
  }
}

// Go's ParseFloat reads all of these; Prometheus spells infinities +Inf/-Inf.
std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

// Label values escape backslash, double quote and newline; HELP escapes backslash
// and newline (exposition format 0.0.4).
std::string escaped(const std::string& text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (quote && c == '"') out += "\\\"";
    else out.push_back(c);
  }
  return out;
}

std::string label_text(const Labels& labels, const std::string& extra_name = "", const std::string& extra_value = "") {
  if (labels.empty() && extra_name.empty()) return "";
  std::string out = "{";
  for (const auto& [name, value] : labels) {
    if (out.size() > 1) out += ",";
    out += name + "=\"" + escaped(value, true) + "\"";
  }
  if (!extra_name.empty()) {
    if (out.size() > 1) out += ",";
    out += extra_name + "=\"" + extra_value + "\"";
  }
  return out + "}";
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  // First bucket whose bound is >= value ("le" is inclusive); past the end is +Inf.
  auto bucket = static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  std::lock_guard lock(mu_);
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  std::lock_guard lock(mu_);
  std::uint64_t running = 0;
  for (auto c : counts_) s.cumulative.push_back(running += c);
  s.sum = sum_;
  s.count = count_;
  return s;
}

std::vector<double> exponential_buckets(double start, double factor, int count) {
  std::vector<double> out;
  double v = start;
  for (int i = 0; i < count; ++i, v *= factor) out.push_back(v);
  return out;
}

Registry::Family& Registry::family(const std::string& name, const std::string& help, Type type, const Labels& labels,
                                   const std::vector<double>& bounds) {
  // REQUIRES: mu_ held.
  for (auto& f : families_) {
    if (f->name != name) continue;
    if (f->type != type || f->help != help || f->bounds != bounds)
      throw std::invalid_argument("metric " + name + " registered twice with different definitions");
    check_labels(name, labels);
    return *f;
  }
  if (!valid_name(name, true)) throw std::invalid_argument("invalid metric name '" + name + "'");
  check_labels(name, labels);
  for (std::size_t i = 0; i < bounds.size(); ++i)
    if (!std::isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1]))
      throw std::invalid_argument("metric " + name + ": bucket bounds must increase and be finite");
  auto f = std::make_unique<Family>();
  f->name = name;
  f->help = help;
  f->type = type;
  f->bounds = bounds;
  families_.push_back(std::move(f));
  return *families_.back();
}

Counter& Registry::counter(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard lock(mu_);
  auto& slot = family(name, help, Type::kCounter, labels, {}).counters[labels];
  if (!slot) slot = std::make_unique<Counter>();
  return *slot;
}

Gauge& Registry::gauge(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard lock(mu_);
  auto& slot = family(name, help, Type::kGauge, labels, {}).gauges[labels];
  if (!slot) slot = std::make_unique<Gauge>();
  return *slot;
}

Histogram& Registry::histogram(const std::string& name, const std::string& help,
                               const std::vector<double>& upper_bounds, const Labels& labels) {
  std::lock_guard lock(mu_);
  auto& slot = family(name, help, Type::kHistogram, labels, upper_bounds).histograms[labels];
  if (!slot) slot = std::make_unique<Histogram>(upper_bounds);
  return *slot;
}

void Registry::render_family(const Family& f, std::string& out) {
  static const char* type_names[] = {"counter", "gauge", "histogram"};
  out += "# HELP " + f.name + " " + escaped(f.help, false) + "\n";
  out += "# TYPE " + f.name + " " + type_names[static_cast<int>(f.type)] + "\n";
  for (const auto& [labels, c] : f.counters) out += f.name + label_text(labels) + " " + number(c->value()) + "\n";
  for (const auto& [labels, g] : f.gauges) out += f.name + label_text(labels) + " " + number(g->value()) + "\n";
  for (const auto& [labels, h] : f.histograms) {
    auto s = h->snapshot();
    for (std::size_t i = 0; i < f.bounds.size(); ++i)
      out += f.name + "_bucket" + label_text(labels, "le", number(f.bounds[i])) + " " +
             std::to_string(s.cumulative[i]) + "\n";
    out += f.name + "_bucket" + label_text(labels, "le", "+Inf") + " " + std::to_string(s.count) + "\n";
    out += f.name + "_sum" + label_text(labels) + " " + number(s.sum) + "\n";
    out += f.name + "_count" + label_text(labels) + " " + std::to_string(s.count) + "\n";
  }
}

std::string Registry::render() const {
  std::string out;
  std::lock_guard lock(mu_);
  for (const auto& f : families_) render_family(*f, out);
  return out;
}

}  // namespace outbox::metrics
