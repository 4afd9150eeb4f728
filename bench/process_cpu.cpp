#include "process_cpu.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <pqxx/pqxx>
#include <sstream>
#include <vector>

#include "outbox/pqxx_compat.h"

namespace bench {

namespace {

// The fields of /proc/PID/stat from the 3rd (state) on; nullopt when it is gone.
std::optional<std::vector<std::string>> stat_fields(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  // Fields after the command name, which is in parentheses and may hold spaces.
  auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(close + 2));
  std::vector<std::string> fields;
  for (std::string field; rest >> field;) fields.push_back(field);
  return fields;
}

}  // namespace

std::optional<double> process_cpu_seconds(pid_t pid) {
  const auto fields = stat_fields(pid);
  if (!fields || fields->size() < 13) return std::nullopt;
  const unsigned long long utime = std::stoull((*fields)[11]), stime = std::stoull((*fields)[12]);  // fields 14, 15
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::optional<double> process_tree_cpu_seconds(pid_t pid) {
  const auto fields = stat_fields(pid);
  if (!fields || fields->size() < 15) return std::nullopt;
  unsigned long long ticks = 0;
  for (std::size_t i = 11; i <= 14; ++i) ticks += std::stoull((*fields)[i]);  // fields 14-17
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  double seconds = static_cast<double>(ticks) / tick;
  // A child that exits between two readings moves from the live sum to the parent's
  // cutime/cstime (once reaped) with all of its time: the total never goes back.
  if (DIR* proc = ::opendir("/proc")) {
    while (const dirent* e = ::readdir(proc)) {
      if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
      const pid_t child = static_cast<pid_t>(std::atol(e->d_name));
      const auto f = stat_fields(child);
      if (!f || f->size() < 13 || std::stol((*f)[1]) != pid) continue;
      seconds += static_cast<double>(std::stoull((*f)[11]) + std::stoull((*f)[12])) / tick;
    }
    ::closedir(proc);
  }
  return seconds;
}

std::optional<double> process_rss_mib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return std::nullopt;
}

std::optional<pid_t> parent_pid(pid_t pid) {
  const auto fields = stat_fields(pid);
  if (!fields || fields->size() < 2) return std::nullopt;
  return static_cast<pid_t>(std::stol((*fields)[1]));  // field 4
}

std::optional<std::int64_t> process_run_ns(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/schedstat");
  std::int64_t ns = 0;
  if (!(in >> ns)) return std::nullopt;
  return ns;
}

std::optional<double> machine_busy_seconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) || cpu != "cpu")
    return std::nullopt;
  return static_cast<double>(user + nice + system + irq + softirq + steal) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::optional<pid_t> broker_pid() {
  const char* dir = std::getenv("OUTBOX_LOCAL_DIR");
  std::ifstream in(std::string(dir && *dir ? dir : "/tmp/outbox-relay-local") + "/rabbitmq/rabbitmq.pid");
  pid_t pid = 0;
  if (!(in >> pid) || pid <= 0 || !process_cpu_seconds(pid)) return std::nullopt;
  return pid;
}

BackendCpu::BackendCpu(pqxx::connection& admin, std::string application_name)
    : admin_(admin), application_name_(std::move(application_name)) {
  sample();
  start_ = last_;
}

void BackendCpu::sample() {
  pqxx::nontransaction tx(admin_);
  for (const auto& r : outbox::pgx::exec_params(tx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
                                                application_name_)) {
    int pid = r[0].as<int>();
    if (auto cpu = process_cpu_seconds(pid)) last_[pid] = *cpu;
  }
}

double BackendCpu::total_seconds() const {
  double sum = 0;
  for (const auto& [pid, cpu] : last_) {
    auto it = start_.find(pid);
    sum += cpu - (it == start_.end() ? 0 : it->second);
  }
  return sum;
}

}  // namespace bench
