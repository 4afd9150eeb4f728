#include "chaos_options.h"

#include <stdexcept>
#include <vector>

namespace chaos {
namespace {

long long number(const std::string& flag, const std::string& text, long long min, long long max) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty())
    throw std::invalid_argument(flag + ": expected an integer, got '" + text + "'");
  if (v < min || v > max)
    throw std::invalid_argument(flag + ": must be between " + std::to_string(min) + " and " + std::to_string(max) +
                                ", got " + text);
  return v;
}

}  // namespace

const char* usage() {
  return "usage: chaos_driver [--duration S] [--rate MSG_PER_S] [--producers N] [--relays N]\n"
         "                    [--batch-size N] [--min-kills N] [--drain-timeout S] [--seed N]\n"
         "                    [--keep-servers] [--cluster] [--max-pause S] [--repo DIR] [--relay-bin PATH]\n"
         "Starts a private PostgreSQL and RabbitMQ, writes events at a steady rate, runs the\n"
         "relays through a TCP proxy while injecting faults for --duration seconds, drains,\n"
         "checks the consumers' ledger against the outbox table and prints a table.\n"
         "--cluster: a 3-node RabbitMQ cluster (quorum queue) and a PostgreSQL primary with a\n"
         "standby instead; faults are node kills and stops and one database failover\n"
         "(--min-kills does not apply; the first round of faults always runs in full);\n"
         "--max-pause S fails the run when a fault stopped publishing for longer than S s.\n"
         "Exit 0 when every check passed, 1 when one failed, 2 on bad arguments.\n";
}

ChaosOptions parse_options(int argc, char** argv) {
  ChaosOptions o;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw std::invalid_argument(a + " needs a value");
      return args[++i];
    };
    if (a == "--duration") o.duration_s = static_cast<int>(number(a, value(), 10, 7 * 24 * 3600));
    else if (a == "--rate") o.rate = static_cast<double>(number(a, value(), 1, 100000));
    else if (a == "--producers") o.producers = static_cast<int>(number(a, value(), 1, 64));
    else if (a == "--relays") o.relays = static_cast<int>(number(a, value(), 1, 16));
    else if (a == "--batch-size") o.batch_size = static_cast<int>(number(a, value(), 1, 100000));
    else if (a == "--min-kills") o.min_kills = static_cast<int>(number(a, value(), 0, 1000000));
    else if (a == "--drain-timeout") o.drain_timeout_s = static_cast<int>(number(a, value(), 10, 86400));
    else if (a == "--seed") o.seed = static_cast<unsigned>(number(a, value(), 0, 4294967295LL));
    else if (a == "--keep-servers") o.keep_servers = true;
    else if (a == "--cluster") o.cluster = true;
    else if (a == "--max-pause") o.max_pause_s = static_cast<double>(number(a, value(), 1, 3600));
    else if (a == "--repo") o.repo = value();
    else if (a == "--relay-bin") o.relay_bin = value();
    else throw std::invalid_argument("unknown argument '" + a + "'");
  }
  return o;
}

}  // namespace chaos
