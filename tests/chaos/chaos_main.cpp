// chaos_driver: the chaos suite's driver (see docs/CHAOS.md).
#include <signal.h>

#include <iostream>
#include <stdexcept>

#include "chaos_options.h"
#include "chaos_run.h"
#include "cluster_run.h"

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help") {
      std::cout << chaos::usage();
      return 0;
    }
  chaos::ChaosOptions options;
  try {
    options = chaos::parse_options(argc, argv);
  } catch (const std::invalid_argument& e) {
    std::cerr << "chaos_driver: " << e.what() << "\n" << chaos::usage();
    return 2;
  }
  ::signal(SIGPIPE, SIG_IGN);  // a cut connection must not kill the driver
  if (options.cluster) {
    chaos::ClusterRun run(options);
    return run.run();
  }
  chaos::ChaosRun run(options);
  return run.run();
}
