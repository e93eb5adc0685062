// Reward servers over HTTP (core/rewards/http_reward.h), against the Python
// server of tests/fixtures/rewards/reward_server.py started by the test:
// scores in both reply shapes, a 503 retried into success, a timeout, a
// refusing status, a reply that is not JSON, a closed port; and the URL forms
// reward_funcs accepts or refuses.
#include "catch.h"

#include "support/reward_server.h"

#include "core/plugin/reward_library.h"
#include "core/rewards/http_endpoint.h"
#include "core/rewards/http_reward.h"
#include "ptrain/sdk/errors.h"

#include <chrono>
#include <filesystem>

namespace {

using namespace ptrain;
namespace fs = std::filesystem;

using testing::RewardServer;

struct Batch {
  sdk::Example example{0, "prompts.jsonl:3", nlohmann::json{{"prompt", "1+1="}, {"answer", "2"}}};
  std::vector<sdk::RewardInput> inputs{{&example, "1+1=", "2", 2, false}, {&example, "1+1=", "x12y345", 8, true}};
};

std::unique_ptr<sdk::RewardFunction> http_function(const std::string& url) {
  return rewards::open_http_reward(url)->create(url);
}

std::string plugin_error(const std::function<void()>& action) {
  try {
    action();
  } catch (const sdk::PluginError& error) {
    return error.what();
  }
  return "(no error)";
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("an HTTP reward server scores the batch it is sent", "[rewards][http]") {
  RewardServer server;
  Batch batch;
  const std::vector<double> digits{1.0, 5.0};                                  // digits of "2" and "x12y345"
  CHECK(http_function(server.url("/digits"))->score(batch.inputs) == digits);  // {"rewards": [...]}
  CHECK(http_function(server.url("/list"))->score(batch.inputs) == digits);    // [...]
  // Through the core's loader, as Context::open_reward_library opens it.
  const std::string url = server.url("/digits");
  const std::unique_ptr<sdk::RewardLibrary> library = plugin::load_reward_library(url, {});
  CHECK(library->function_names() == std::vector<std::string>{url});
  CHECK(library->create(url)->score(batch.inputs) == digits);
}

TEST_CASE("an HTTP reward server's failures are retried, then reported with the URL", "[rewards][http]") {
  RewardServer server;
  Batch batch;
  SECTION("a 503, then an answer on the retry") {
    CHECK(http_function(server.url("/flaky#retries=1"))->score(batch.inputs) == std::vector<double>{1.0, 5.0});
  }
  SECTION("a 503 without retries") {
    const std::string url = server.url("/flaky#retries=0");
    CHECK(plugin_error([&] { http_function(url)->score(batch.inputs); }) ==
          "reward server '" + url + "': 1 attempts failed; the last: status 503 (warming up)");
  }
  SECTION("no answer within the timeout, on each attempt") {
    const std::string url = server.url("/slow#timeout_s=0.3&retries=1");
    const auto start = std::chrono::steady_clock::now();
    const std::string error = plugin_error([&] { http_function(url)->score(batch.inputs); });
    const double elapsed_s = seconds_since(start);
    CHECK_THAT(error, Catch::StartsWith("reward server '" + url +
                                        "': 2 attempts failed; the last: no reply within "
                                        "timeout_s = 0.300000 s"));
    CHECK(elapsed_s >= 0.6);  // two attempts of 0.3 s, then the 0.1 s pause between them
    CHECK(elapsed_s < 2.5);   // well before the server's 3 s answer
  }
  SECTION("a refusing status is not retried") {
    const std::string url = server.url("/bad_request#retries=3");
    CHECK(plugin_error([&] { http_function(url)->score(batch.inputs); }) ==
          "reward server '" + url + "' refused the batch: status 400 (no such task)");
  }
  SECTION("a reply that is not a list of numbers") {
    const std::string url = server.url("/not_json");
    CHECK(plugin_error([&] { http_function(url)->score(batch.inputs); }) ==
          "reward server '" + url +
              "' replied <html>oops</html>; expected a JSON list of numbers or "
              "{\"rewards\": [...]}");
  }
}

TEST_CASE("a reward server that is not there is reported after the retries", "[rewards][http]") {
  Batch batch;
  const std::string url = "http://127.0.0.1:9/score#retries=1&timeout_s=2";  // the discard port: nothing listens
  CHECK_THAT(plugin_error([&] { http_function(url)->score(batch.inputs); }),
             Catch::StartsWith("reward server '" + url + "': 2 attempts failed; the last: cannot connect: "));
}

TEST_CASE("reward server URLs: what they hold and what is refused", "[rewards][http][bad_inputs]") {
  const rewards::HttpEndpoint full =
      rewards::parse_http_endpoint("http://rm.local:8000/v1/score?task=math#timeout_s=2.5&retries=4");
  CHECK(full.host == "rm.local");
  CHECK(full.port == 8000);
  CHECK(full.target == "/v1/score?task=math");
  CHECK(full.timeout_s == 2.5);
  CHECK(full.retries == 4);
  const rewards::HttpEndpoint bare = rewards::parse_http_endpoint("http://localhost");
  CHECK(bare.port == 80);
  CHECK(bare.target == "/");
  CHECK(bare.timeout_s == 30.0);
  CHECK(bare.retries == 2);

  for (const auto& [url, reason] : std::vector<std::pair<std::string, std::string>>{
           {"https://rm.local/score", "https is not supported; serve the reward over http:// (e.g. on localhost)"},
           {"http://:8000/score", "no host name"},
           {"http://localhost:80000/score", "port '80000': expected a number from 1 to 65535"},
           {"http://localhost:x/score", "port 'x': expected a number from 1 to 65535"},
           {"http://localhost/score#timeout_s=0", "setting 'timeout_s': expected > 0, got 0"},
           {"http://localhost/score#retries=1.5", "setting 'retries': expected an integer in [0, 100], got 1.5"},
           {"http://localhost/score#timeout=3",
            "unknown setting 'timeout' after '#'; expected timeout_s=SECONDS and/or retries=COUNT"}}) {
    INFO(url);
    std::string message = "(no error)";
    try {
      plugin::load_reward_library(url, {});
    } catch (const sdk::ConfigError& error) {
      message = error.what();
    }
    CHECK(message == "reward server URL '" + url + "': " + reason);
  }
}
