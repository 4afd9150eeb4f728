#include "http_scrape.h"

#include <sys/wait.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "relay_process.h"

namespace testenv {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;

HttpReply http_request(const std::string& address, const std::string& target, const std::string& method) {
  auto colon = address.rfind(':');
  net::io_context io;
  net::ip::tcp::resolver resolver(io);
  beast::tcp_stream stream(io);
  stream.expires_after(std::chrono::seconds(10));
  stream.connect(resolver.resolve(address.substr(0, colon), address.substr(colon + 1)));
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, address);
  req.prepare_payload();
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(stream, buffer, res);
  beast::error_code ignored;
  stream.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  return HttpReply{static_cast<int>(res.result_int()), std::string(res[http::field::content_type]), res.body()};
}

std::map<std::string, double> parse_prometheus(const std::string& text) {
  static const std::regex type_line(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped))");
  static const std::regex help_line(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .*)");
  static const std::regex sample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*"(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*")*)?\})? (\S+))");
  std::map<std::string, double> out;
  std::set<std::string> typed;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    std::smatch m;
    auto bad = [&](const std::string& why) {
      return std::runtime_error("line " + std::to_string(n) + ": " + why + ": " + line);
    };
    if (line.empty()) continue;
    if (std::regex_match(line, m, type_line)) {
      if (!typed.insert(m[1]).second) throw bad("second TYPE for the family");
      continue;
    }
    if (std::regex_match(line, help_line)) continue;
    if (line[0] == '#') throw bad("unknown comment");
    if (!std::regex_match(line, m, sample)) throw bad("not a sample");
    std::string name = m[1];
    std::string family = name;
    for (const char* suffix : {"_bucket", "_sum", "_count"})
      if (!typed.count(family) && family.size() > std::string(suffix).size() &&
          family.compare(family.size() - std::string(suffix).size(), std::string::npos, suffix) == 0)
        family = family.substr(0, family.size() - std::string(suffix).size());
    if (!typed.count(family)) throw bad("sample before its # TYPE");
    const std::string value = m[7];
    double v = 0;
    if (value == "+Inf") v = HUGE_VAL;
    else if (value == "-Inf") v = -HUGE_VAL;
    else {
      std::size_t used = 0;
      try {
        v = std::stod(value, &used);
      } catch (...) {
        throw bad("bad number");
      }
      if (used != value.size()) throw bad("bad number");
    }
    std::string key = name + std::string(m[2]);
    if (!out.emplace(key, v).second) throw bad("duplicate series");
  }
  return out;
}

std::string python_prometheus_check(const std::string& text) {
  auto input = write_temp_file(text, ".prom");
  auto output = input + ".out";
  const std::string cmd =
      "/usr/bin/python3 -c 'import sys\n"
      "from prometheus_client.parser import text_string_to_metric_families as parse\n"
      "fams = list(parse(open(sys.argv[1]).read()))\n"
      "assert fams, \"no metric families\"\n' " +
      input + " >" + output + " 2>&1";
  int status = std::system(cmd.c_str());
  std::ifstream in(output);
  std::stringstream s;
  s << in.rdbuf();
  std::remove(input.c_str());
  std::remove(output.c_str());
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  return "python prometheus_client rejected the text: " + s.str();
}

}  // namespace testenv
