#include "cpu_isolation.h"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <sstream>

#include "amqp_bench_client.h"  // BenchError
#include "process_cpu.h"

namespace bench {
namespace {

std::vector<pid_t> numbered_entries(const std::string& dir) {
  std::vector<pid_t> ids;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      char* end = nullptr;
      const long id = std::strtol(e->d_name, &end, 10);
      if (end != e->d_name && *end == '\0' && id > 0) ids.push_back(static_cast<pid_t>(id));
    }
    ::closedir(d);
  }
  return ids;
}

// The pid itself, then with_children its direct children.
std::vector<pid_t> processes(pid_t pid, bool with_children) {
  std::vector<pid_t> all = {pid};
  if (with_children)
    for (pid_t p : numbered_entries("/proc"))
      if (p != pid && parent_pid(p) == pid) all.push_back(p);
  return all;
}

std::string cpu_list(const cpu_set_t& set) {
  std::string s;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) s += (s.empty() ? "" : ",") + std::to_string(c);
  return s;
}

cpu_set_t cpu_set_of(const std::string& list) {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::istringstream in(list);
  for (std::string cpu; std::getline(in, cpu, ',');)
    if (!cpu.empty()) CPU_SET(std::stoi(cpu), &set);
  return set;
}

}  // namespace

pid_t BrokerCpuIsolation::postmaster_of(pid_t backend) {
  const pid_t parent = parent_pid(backend).value_or(0);
  if (parent <= 1)
    throw BenchError("--broker-cpus: PostgreSQL is not on this machine (its backend " + std::to_string(backend) +
                     " is not in /proc)");
  return parent;
}

BrokerCpuIsolation::BrokerCpuIsolation(const std::vector<long>& broker_cpus, pid_t broker, pid_t postmaster) {
  cpu_set_t allowed, for_broker, for_rest;
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0)
    throw BenchError(std::string("--broker-cpus: cannot read this process's CPUs: ") + std::strerror(errno));
  CPU_ZERO(&for_broker);
  for (long c : broker_cpus) {
    if (c < 0 || c >= CPU_SETSIZE || !CPU_ISSET(c, &allowed))
      throw BenchError("--broker-cpus: CPU " + std::to_string(c) + " is not one this process may use (" +
                       cpu_list(allowed) + ")");
    CPU_SET(c, &for_broker);
  }
  CPU_XOR(&for_rest, &allowed, &for_broker);
  if (CPU_COUNT(&for_rest) == 0)
    throw BenchError("--broker-cpus: " + cpu_list(for_broker) +
                     " leaves no CPU for PostgreSQL and the relays (this process may use " + cpu_list(allowed) + ")");
  try {
    pin(broker, false, for_broker, "the broker");
    pin(postmaster, true, for_rest, "PostgreSQL");
    pin(::getpid(), false, for_rest, "the bench");
  } catch (...) {
    restore();
    throw;
  }
  description_ = "broker on CPU " + cpu_list(for_broker) + "; PostgreSQL, the bench and the relays on CPU " +
                 cpu_list(for_rest);
  // What restore() needs, for the Janitor: "P pid with_children cpus" per process,
  // then "T tid cpus" per thread.
  Janitor::Fields fields;
  for (const auto& p : pinned_)
    fields.insert(fields.end(), {"P", std::to_string(p.pid), p.with_children ? "1" : "0", cpu_list(p.original)});
  for (const auto& t : tasks_) fields.insert(fields.end(), {"T", std::to_string(t.tid), cpu_list(t.original)});
  record_ = Janitor::record("cpus", fields);
}

std::string BrokerCpuIsolation::restore_recorded(const Janitor::Fields& fields) {
  BrokerCpuIsolation undo;
  for (std::size_t i = 0; i < fields.size();) {
    if (fields[i] == "P" && i + 3 < fields.size()) {
      undo.pinned_.push_back({static_cast<pid_t>(std::stol(fields[i + 1])), fields[i + 2] == "1",
                              cpu_set_of(fields[i + 3])});
      i += 4;
    } else if (fields[i] == "T" && i + 2 < fields.size()) {
      undo.tasks_.push_back({static_cast<pid_t>(std::stol(fields[i + 1])), cpu_set_of(fields[i + 2])});
      i += 3;
    } else {
      throw BenchError("malformed cpus record at field " + std::to_string(i));
    }
  }
  const std::size_t threads = undo.tasks_.size();
  undo.restore();
  return "gave the CPUs back to the " + std::to_string(threads) + " threads of the broker and PostgreSQL";
}

BrokerCpuIsolation::~BrokerCpuIsolation() { restore(); }

// Every thread of each process: the broker's schedulers are threads of one process.
void BrokerCpuIsolation::pin(pid_t pid, bool with_children, const cpu_set_t& mask, const char* what) {
  Pinned p{pid, with_children, {}};
  if (::sched_getaffinity(pid, sizeof p.original, &p.original) != 0)
    throw BenchError(std::string("--broker-cpus: cannot read the CPUs of ") + what + " (pid " + std::to_string(pid) +
                     "): " + std::strerror(errno));
  pinned_.push_back(p);
  for (pid_t process : processes(pid, with_children))
    for (pid_t task : numbered_entries("/proc/" + std::to_string(process) + "/task")) {
      Task t{task, {}};
      if (::sched_getaffinity(task, sizeof t.original, &t.original) != 0) continue;  // gone
      tasks_.push_back(t);
      if (::sched_setaffinity(task, sizeof mask, &mask) != 0 && errno != ESRCH)
        throw BenchError(std::string("--broker-cpus: cannot pin ") + what + " (task " + std::to_string(task) +
                         "): " + std::strerror(errno) + " (root or CAP_SYS_NICE is needed)");
    }
}

// Each thread gets its own affinity back; threads and children started while pinned
// (PostgreSQL backends) get the one their process (the postmaster) had.
void BrokerCpuIsolation::restore() noexcept {
  for (const auto& p : pinned_)
    for (pid_t process : processes(p.pid, p.with_children))
      for (pid_t task : numbered_entries("/proc/" + std::to_string(process) + "/task")) {
        const cpu_set_t* original = &p.original;
        for (const auto& t : tasks_)
          if (t.tid == task) original = &t.original;
        if (::sched_setaffinity(task, sizeof *original, original) != 0 && errno != ESRCH)
          std::cerr << "outbox-bench: could not give task " << task << " its CPUs back: " << std::strerror(errno)
                    << "\n";
      }
  pinned_.clear();
  tasks_.clear();
  Janitor::forget(record_);
  record_ = 0;
}

}  // namespace bench
