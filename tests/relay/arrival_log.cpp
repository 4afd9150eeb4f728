#include "arrival_log.h"

#include <exception>

namespace hostile {

ArrivalLog::ArrivalLog(testenv::TestBroker& broker, std::unordered_set<std::string> expected)
    : broker_(broker), expected_(std::move(expected)), thread_([this] { consume(); }) {}

ArrivalLog::~ArrivalLog() { stop(); }

void ArrivalLog::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void ArrivalLog::consume() {
  try {
    while (!stop_) {
      // One message per call, so each gets its own arrival time; a short idle wait
      // keeps stop() prompt.
      for (auto& m : broker_.receive(1, std::chrono::milliseconds(20))) {
        auto& times = arrivals_[m.message_id];
        times.push_back(Clock::now());
        if (times.size() == 1 && expected_.count(m.message_id)) ++expected_arrived_;
      }
    }
  } catch (const std::exception& e) {
    error_ = e.what();
  }
}

}  // namespace hostile
