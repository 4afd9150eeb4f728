#include "wire_phase.h"

#include <cstdio>
#include <iostream>
#include <map>

#include "janitor.h"
#include "number_text.h"

namespace bench {
namespace {

using nlohmann::json;

struct Variant {
  const char* name;
  WireShape shape;
};

// Each optional part alone on top of the bare message, then the two sets the relay
// can send: its contract minimum (message id, the row's exchange) and its default.
std::vector<Variant> variants() {
  auto with = [](auto change) {
    WireShape s = WireShape::bare();
    change(s);
    return s;
  };
  return {
      {"bare: content type, persistent, default exchange", WireShape::bare()},
      {"+ mandatory", with([](WireShape& s) { s.mandatory = true; })},
      {"+ message id", with([](WireShape& s) { s.message_id = true; })},
      {"+ type and timestamp", with([](WireShape& s) { s.type_timestamp = true; })},
      {"+ one-entry header table (x-outbox-id)", with([](WireShape& s) { s.row_id_header = true; })},
      {"direct exchange instead of the default one", with([](WireShape& s) { s.default_exchange = false; })},
      {"relay, lean: message id, direct exchange", with([](WireShape& s) {
         s.message_id = true;
         s.default_exchange = false;
       })},
      {"relay, default: all of the above", WireShape::relay()},
  };
}

// Relay settings on top of the run's own (--relay-setting).
RelaySpec with_settings(const RelaySpec& spec, std::vector<std::string> extra) {
  RelaySpec s = spec;
  s.settings.insert(s.settings.end(), extra.begin(), extra.end());
  return s;
}

json ceilings(BenchEnv& env, const BenchOptions& o, std::map<std::string, double>& by_name) {
  const auto all = variants();
  std::map<std::string, std::vector<double>> rounds;
  // Round-robin over the variants, so drift on the machine touches all alike.
  for (int r = 0; r < o.repeats; ++r)
    for (const auto& v : all)
      rounds[v.name].push_back(measure_broker_ceiling(env, o.message_bytes, o.backlog, v.shape).msgs_per_s);
  json table = json::array();
  const double bare = median(rounds[all.front().name]);
  std::cout << "wire: broker ceiling by what each message carries (" << o.message_bytes << " B, median of " << o.repeats
            << "):\n";
  for (const auto& v : all) {
    const double m = median(rounds[v.name]);
    by_name[v.name] = m;
    const double cost = 1.0 - m / bare;
    std::cout << "  " << v.name << ": " << fmt(m) << " msg/s, cost " << fmt(cost * 100, 1) << " % of bare\n";
    table.push_back(json{{"variant", v.name}, {"msgs_per_s", m}, {"cost_vs_bare", cost}, {"rounds", rounds[v.name]}});
  }
  return table;
}

}  // namespace

json run_wire_phase(BenchEnv& env, const BenchOptions& o, const RelaySpec& spec) {
  std::map<std::string, double> ceiling;
  json out;
  out["ceilings"] = ceilings(env, o, ceiling);
  // amq.fanout exists on every vhost, so the relay's start check passes; the bench's
  // messages are all routable, so nothing would reach it.
  const std::vector<std::string> lean = {"amqp.send_row_id=false", "amqp.send_type=false", "amqp.send_timestamp=false",
                                         "amqp.alternate_exchange=amq.fanout"};
  struct Drain {
    const char* name;
    RelaySpec spec;
    const char* ceiling;
  };
  const Drain drains[] = {
      {"default (mark)", spec, "relay, default: all of the above"},
      {"lean wire (mark)", with_settings(spec, lean), "relay, lean: message id, direct exchange"},
      {"default wire, on_publish delete", with_settings(spec, {"on_publish=delete"}),
       "relay, default: all of the above"},
  };
  std::map<std::string, std::vector<double>> rate, pg_cpu;
  for (int r = 0; r < o.repeats; ++r)
    for (const auto& d : drains) {
      auto res = measure_drain(env, d.spec, DrainPlan{o.backlog, 1, o.message_bytes});
      rate[d.name].push_back(res.msgs_per_s);
      pg_cpu[d.name].push_back(res.pg_cpu_us_per_msg);
    }
  std::cout << "wire: one-relay drains, each against its own ceiling:\n";
  out["drains"] = json::array();
  for (const auto& d : drains) {
    const double m = median(rate[d.name]), ratio = m / ceiling[d.ceiling], pg = median(pg_cpu[d.name]);
    std::cout << "  " << d.name << ": " << fmt(m) << " msg/s, " << fmt(ratio, 2) << " x its ceiling ("
              << fmt(ceiling[d.ceiling]) << "), PostgreSQL " << fmt(pg, 1) << " us CPU/msg\n";
    out["drains"].push_back(json{{"settings", d.name},
                                 {"msgs_per_s", m},
                                 {"ratio_to_ceiling", ratio},
                                 {"ceiling_msgs_per_s", ceiling[d.ceiling]},
                                 {"pg_cpu_us_per_msg", pg},
                                 {"rounds", rate[d.name]}});
  }
  return out;
}

}  // namespace bench

namespace bench {

nlohmann::json run_fanout_phase(BenchEnv& env, const BenchOptions& o, const RelaySpec& spec, int queues) {
  using nlohmann::json;
  json out = json::array();
  AmqpBenchClient admin(env.amqp_uri());
  for (int n : {1, queues}) {
    std::vector<std::string> extra;
    std::vector<Janitor::Id> records;
    for (int i = 1; i < n; ++i) {
      extra.push_back(env.queue() + "_fan" + std::to_string(i));
      records.push_back(Janitor::record("queue", {"", extra.back()}));
      admin.declare(env.exchange(), extra.back(), env.routing_key());
    }
    auto purge_extra = [&] {
      for (const auto& q : extra) admin.purge(q);
    };
    std::vector<double> ceiling, drain1, drain2;
    for (int r = 0; r < o.repeats; ++r) {
      ceiling.push_back(measure_broker_ceiling(env, o.message_bytes, o.backlog).msgs_per_s);
      purge_extra();
      drain1.push_back(measure_drain(env, spec, DrainPlan{o.backlog, 1, o.message_bytes}).msgs_per_s);
      purge_extra();
      drain2.push_back(measure_drain(env, spec, DrainPlan{o.backlog, 2, o.message_bytes}).msgs_per_s);
      purge_extra();
    }
    for (const auto& q : extra) admin.remove_queue(q);
    for (auto id : records) Janitor::forget(id);
    const double c = median(ceiling), d1 = median(drain1), d2 = median(drain2);
    std::cout << "fan-out to " << n << " queue(s): broker ceiling " << fmt(c) << " msg/s | drain 1 relay " << fmt(d1)
              << " msg/s (" << fmt(d1 / c, 2) << " x ceiling) | 2 relays " << fmt(d2) << " msg/s (" << fmt(d2 / c, 2)
              << " x ceiling)\n";
    out.push_back(json{{"queues", n},
                       {"broker_ceiling_msgs_per_s", c},
                       {"drain_1_relay_msgs_per_s", d1},
                       {"drain_2_relays_msgs_per_s", d2},
                       {"ratio_1_relay", d1 / c},
                       {"ratio_2_relays", d2 / c}});
  }
  return out;
}

}  // namespace bench
