// The relay binary's /healthz under attack on its metrics port: an idle flood and a
// slowloris together must not delay the liveness probe (which would get the relay
// restarted), and the server closes every hostile connection.
#include <doctest/doctest.h>

#include <future>
#include <thread>

#include "http_attack.h"
#include "http_scrape.h"
#include "relay_process.h"
#include "test_env.h"

using namespace std::chrono_literals;
using testenv::RelayProcess;
using testenv::ScopedSchema;

TEST_CASE("a relay's /healthz answers within 100 ms while 500 idle and 100 slowloris connections are held open") {
  REQUIRE(testenv::raise_open_file_limit(1000));  // 600 client ends here; the relay's are its own
  ScopedSchema schema;
  RelayProcess relay(testenv::relay_config_yaml(schema.name()) + "http:\n  listen: 127.0.0.1:0\n");
  const auto address = testenv::wait_for_http_address([&] { return relay.log(); }, 20s);
  REQUIRE(testenv::http_request(address, "/healthz").status == 200);

  testenv::HostileOptions flood;
  flood.connections = 500;
  flood.duration = 4s;
  testenv::HostileOptions slowloris;
  slowloris.connections = 100;
  slowloris.duration = 4s;
  slowloris.byte_interval = 1s;
  auto idle = std::async(std::launch::async, [&] { return testenv::hostile_clients(address, flood); });
  auto slow = std::async(std::launch::async, [&] { return testenv::hostile_clients(address, slowloris); });
  std::this_thread::sleep_for(300ms);  // both attacks are up
  auto probes = testenv::probe_series(address, "/healthz", 25ms, 3500ms);
  auto idle_stats = idle.get();
  auto slow_stats = slow.get();

  MESSAGE("probes: " << probes.probes << ", failed: " << probes.failures << ", p50 " << probes.quantile_ms(0.5)
                     << " ms, p99 " << probes.quantile_ms(0.99) << " ms, max " << probes.max_ms()
                     << " ms; idle flood opened " << idle_stats.opened << ", slowloris opened " << slow_stats.opened);
  INFO("probes: " << probes.probes << ", failed: " << probes.failures << " (" << probes.first_failure << "), p50 "
                  << probes.quantile_ms(0.5) << " ms, max " << probes.max_ms() << " ms");
  INFO("idle flood: opened " << idle_stats.opened << ", longest lived " << idle_stats.max_lifetime_ms
                             << " ms, still open " << idle_stats.still_open);
  INFO("slowloris: opened " << slow_stats.opened << ", longest lived " << slow_stats.max_lifetime_ms
                            << " ms, still open " << slow_stats.still_open);
  CHECK(probes.probes >= 100);
  CHECK(probes.failures == 0);
  CHECK(probes.max_ms() < 100);
  CHECK(idle_stats.opened >= 500);
  CHECK(slow_stats.opened >= 100);
  // Closed by the relay: shed for newer ones, or at the 500 ms idle / header-read
  // timeouts (plus what the client adds to observing the close).
  CHECK(idle_stats.still_open == 0);
  CHECK(slow_stats.still_open == 0);
  CHECK(idle_stats.max_lifetime_ms < 800);
  CHECK(slow_stats.max_lifetime_ms < 800);
  CHECK(relay.running());
}
