// The bench's Janitor without servers: records of temporary files, undone by a
// janitor process when the "run" (a forked child of the test) ends however it ends.
#include "janitor.h"

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "amqp_bench_client.h"  // BenchError
#include "relay_process.h"      // write_temp_file
#include "test_env.h"

namespace {

using bench::Janitor;

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A run in a child process: `body` gets a janitor whose "file" records remove the
// file and append "undo NAME" to `log`. `own_group`: the child leads a process group
// of its own (its janitor in it), as a terminal's foreground job. Returns the
// child's wait status.
int run_child(const std::string& log, const std::function<void()>& body, bool own_group = false) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (own_group) ::setpgid(0, 0);
    try {
      Janitor::start({{"file", [log](const Janitor::Fields& f) {
                         ::unlink(f.at(0).c_str());
                         std::ofstream(log, std::ios::app) << "undo " << f.at(0) << "\n";
                         return "removed " + f.at(0);
                       }}});
      body();
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

}  // namespace

TEST_CASE("what a killed run recorded and did not forget is undone, the most recent first") {
  const std::string log = testenv::write_temp_file("", ".log");
  const std::string a = testenv::write_temp_file("a"), b = testenv::write_temp_file("b"),
                    c = testenv::write_temp_file("c");
  const int status = run_child(log, [&] {
    Janitor::record("file", {a});
    const auto id_b = Janitor::record("file", {b});
    Janitor::record("file", {c});
    Janitor::forget(id_b);
    ::kill(::getpid(), SIGKILL);  // no destructor, no finish(): only the janitor is left
  });
  CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
  // Each undo removes its file, then logs it: wait for the log, not the files.
  const std::string undone = "undo " + c + "\nundo " + a + "\n";
  CHECK(testenv::eventually(std::chrono::seconds(10), [&] { return read_all(log) == undone; }));
  CHECK_FALSE(exists(a));
  CHECK_FALSE(exists(c));
  CHECK(exists(b));
  CHECK(read_all(log) == undone);
  for (const auto& p : {log, b}) ::unlink(p.c_str());
}

TEST_CASE("the janitor outlives the Ctrl-C that stops the run and its whole process group") {
  const std::string log = testenv::write_temp_file("", ".log");
  const std::string a = testenv::write_temp_file("a");
  const int status = run_child(
      log,
      [&] {
        Janitor::record("file", {a});
        ::kill(0, SIGINT);  // the whole group: the run and its janitor
        ::pause();
      },
      true);
  CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGINT));
  CHECK(testenv::eventually(std::chrono::seconds(10), [&] { return read_all(log) == "undo " + a + "\n"; }));
  CHECK_FALSE(exists(a));
  ::unlink(log.c_str());
}

TEST_CASE("a run that ends normally leaves its janitor nothing but what its owners did not remove") {
  const std::string log = testenv::write_temp_file("", ".log");
  const std::string a = testenv::write_temp_file("a"), b = testenv::write_temp_file("b");
  const int status = run_child(log, [&] {
    Janitor::forget(Janitor::record("file", {a}));
    Janitor::record("file", {b});
    Janitor::finish();  // returns once the janitor has undone b
    if (exists(b)) ::_exit(4);
    Janitor::record("file", {a});  // after finish(): nothing is recorded any more
  });
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  CHECK(exists(a));
  CHECK(read_all(log) == "undo " + b + "\n");
  for (const auto& p : {log, a}) ::unlink(p.c_str());
}

TEST_CASE("the janitor reports each undo as one whole line after it is done, and a closing line last") {
  const std::string out = testenv::write_temp_file("", ".err");
  const std::string a = testenv::write_temp_file("a"), b = testenv::write_temp_file("b");
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::FILE* err = std::freopen(out.c_str(), "w", stderr);  // the janitor inherits it
    if (!err) ::_exit(3);
    // A slow undo, as a DROP SCHEMA is: its effect is visible before it returns.
    Janitor::start({{"slow", [](const Janitor::Fields& f) {
                       ::unlink(f.at(0).c_str());
                       std::this_thread::sleep_for(std::chrono::milliseconds(300));
                       return "removed " + f.at(0);
                     }}});
    Janitor::record("slow", {a});
    Janitor::record("slow", {b});
    ::kill(::getpid(), SIGKILL);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
  const std::string prefix = "outbox-bench: cleanup after the run: ";
  const std::string closing = prefix + "done: 2 undone, 0 failed\n";
  std::string seen;
  bool whole_lines = true;  // at every look, only whole lines
  const bool done = testenv::eventually(
      std::chrono::seconds(10),
      [&] {
        seen = read_all(out);
        if (!seen.empty() && seen.back() != '\n') whole_lines = false;
        return seen.find(closing) != std::string::npos;
      },
      std::chrono::milliseconds(1));
  CHECK(done);
  CHECK(whole_lines);
  CHECK(seen == prefix + "removed " + b + "\n" + prefix + "removed " + a + "\n" + closing);
  for (const auto& p : {out, a, b}) ::unlink(p.c_str());
}

TEST_CASE("a record with whitespace in a field, or of a kind nobody can undo, is refused") {
  const std::string log = testenv::write_temp_file("", ".log");
  const int status = run_child(log, [&] {
    bool spaced = false, unknown = false;
    try {
      Janitor::record("file", {"/tmp/a b"});
    } catch (const bench::BenchError& e) {
      spaced = std::string(e.what()).find("holds whitespace: '/tmp/a b'") != std::string::npos;
    }
    try {
      Janitor::record("table", {"x"});
    } catch (const bench::BenchError& e) {
      unknown = std::string(e.what()).find("no undo for records of kind 'table'") != std::string::npos;
    }
    Janitor::finish();
    ::_exit(spaced && unknown ? 0 : 5);
  });
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  CHECK(read_all(log).empty());
  ::unlink(log.c_str());
}

TEST_CASE("without start() recording does nothing: other programs link the bench's parts") {
  const auto id = Janitor::record("anything", {"with space"});
  CHECK(id == 0);
  Janitor::forget(id);
  Janitor::finish();
}
