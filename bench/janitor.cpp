#include "janitor.h"

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <utility>

#include "amqp_bench_client.h"  // BenchError

namespace bench {
namespace {

struct State {
  std::mutex mu;
  int fd = -1;  // the run's end of the socket pair; -1 before start() and after finish()
  pid_t janitor = -1;
  std::set<std::string> kinds;
  Janitor::Id next = 1;
  bool warned = false;
};

State& state() {
  static State s;
  return s;
}

// REQUIRES: s.mu held. A janitor that died (it should not) costs a warning, never the run.
void send_line(State& s, const std::string& line) {
  for (std::size_t done = 0; done < line.size();) {
    const ssize_t n = ::send(s.fd, line.data() + done, line.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (!s.warned)
        std::cerr << "outbox-bench: the janitor process is gone (" << std::strerror(errno)
                  << "): a run killed from now on leaves its schema, queue and relays behind\n";
      s.warned = true;
      return;
    }
    done += static_cast<std::size_t>(n);
  }
}

std::string joined(const std::string& kind, const Janitor::Fields& fields) {
  std::string s = kind;
  for (const auto& f : fields) s += " '" + f + "'";
  return s;
}

// A terminal's Ctrl-C, Ctrl-\ and hang-up reach the whole foreground group: the
// janitor outlives them (and SIGTERM, SIGPIPE) to clean up after the run they stopped.
constexpr int kIgnored[] = {SIGINT, SIGQUIT, SIGHUP, SIGTERM, SIGPIPE};

using Records = std::map<Janitor::Id, std::pair<std::string, Janitor::Fields>>;

const std::string kPrefix = "outbox-bench: cleanup after the run: ";

// One whole line in one write(2), composed before it is written: a reader of the
// run's output (a test, a terminal) never sees a line's start without its end. Its
// undo ran before, so "dropped schema X" is never printed while the DROP still runs
// (with std::cerr's unit buffering the prefix went out first and the rest after the
// undo returned: issue 56, a reader saw "cleanup after the run: " alone).
void say(const std::string& line) {
  for (std::size_t done = 0; done < line.size();) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nobody reads any more: nothing else to tell
    done += static_cast<std::size_t>(n);
  }
}

// One line of the wire: "+ID KIND =FIELD..." records, "-ID" forgets. Each field
// carries a leading '=' so that an empty one is still a token.
void apply_line(const std::string& text, Records& open) {
  std::istringstream line(text);
  std::string head, kind, field;
  line >> head;
  if (head.size() < 2) return;
  const Janitor::Id id = std::stoull(head.substr(1));
  if (head[0] == '-') {
    open.erase(id);
    return;
  }
  line >> kind;
  Janitor::Fields fields;
  while (line >> field) fields.push_back(field.substr(1));
  open[id] = {kind, std::move(fields)};
}

// The janitor process: reads records until the socket closes, then undoes what is
// still recorded, the most recent first.
[[noreturn]] void serve(int fd, const std::map<std::string, Janitor::Undo>& undo_by_kind, const sigset_t& mask) {
  for (int sig : kIgnored) ::signal(sig, SIG_IGN);
  ::pthread_sigmask(SIG_SETMASK, &mask, nullptr);
  Records open;
  std::string buffer;
  char chunk[4096];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    buffer.append(chunk, static_cast<std::size_t>(n));
    for (std::size_t eol; (eol = buffer.find('\n')) != std::string::npos; buffer.erase(0, eol + 1))
      apply_line(buffer.substr(0, eol), open);
  }
  std::size_t undone = 0, failed = 0;
  for (auto it = open.rbegin(); it != open.rend(); ++it) {
    const auto& [kind, fields] = it->second;
    std::string line;
    try {
      line = undo_by_kind.at(kind)(fields);
      ++undone;
    } catch (const std::exception& e) {
      line = "could not undo " + joined(kind, fields) + ": " + e.what();
      ++failed;
    }
    say(kPrefix + line + "\n");
  }
  if (undone + failed > 0)
    say(kPrefix + "done: " + std::to_string(undone) + " undone, " + std::to_string(failed) + " failed\n");
  ::_exit(0);
}

}  // namespace

void Janitor::start(std::map<std::string, Undo> undo_by_kind) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.janitor > 0) throw BenchError("janitor: started twice");
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    throw BenchError(std::string("janitor: socketpair failed: ") + std::strerror(errno));
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  // Blocked across the fork: a Ctrl-C that arrives before the janitor ignores it must
  // not kill the janitor (serve() ignores them, then unblocks).
  sigset_t ignored, before;
  sigemptyset(&ignored);
  for (int sig : kIgnored) sigaddset(&ignored, sig);
  ::pthread_sigmask(SIG_BLOCK, &ignored, &before);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    serve(fds[1], undo_by_kind, before);
  }
  const int err = errno;
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw BenchError(std::string("janitor: fork failed: ") + std::strerror(err));
  }
  ::close(fds[1]);
  s.fd = fds[0];
  s.janitor = pid;
  for (const auto& kv : undo_by_kind) s.kinds.insert(kv.first);
}

void Janitor::finish() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.fd < 0) return;
  ::close(s.fd);
  s.fd = -1;
  int status = 0;
  while (::waitpid(s.janitor, &status, 0) < 0 && errno == EINTR) {
  }
}

Janitor::Id Janitor::record(const std::string& kind, const Fields& fields) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.fd < 0) return 0;
  if (!s.kinds.count(kind)) throw BenchError("janitor: no undo for records of kind '" + kind + "'");
  const Id id = s.next++;
  std::string line = "+" + std::to_string(id) + " " + kind;
  for (const auto& f : fields) {
    if (f.find_first_of(" \t\r\n") != std::string::npos)
      throw BenchError("janitor: a field of a " + kind + " record holds whitespace: '" + f + "'");
    line += " =" + f;
  }
  send_line(s, line + "\n");
  return id;
}

void Janitor::forget(Id id) {
  if (id == 0) return;
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.fd >= 0) send_line(s, "-" + std::to_string(id) + "\n");
}

}  // namespace bench
