#include "core/rewards/http_reward.h"

#include "core/log/logger.h"
#include "core/rewards/http_endpoint.h"
#include "core/rewards/http_post.h"
#include "core/rewards/reward_batch.h"
#include "ptrain/sdk/errors.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace ptrain::rewards {
namespace {

constexpr size_t kReplyExcerpt = 300;  // characters of a bad reply quoted in an error

// The scores in a 200 reply: a JSON list of numbers, or an object whose
// "rewards" is one.
std::vector<double> scores_in_reply(const std::string& label, const std::string& body) {
  const nlohmann::json reply = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  const nlohmann::json* list = &reply;
  if (reply.is_object() && reply.contains("rewards")) list = &reply.at("rewards");
  if (!list->is_array()) {
    throw sdk::PluginError("reward server " + label + " replied " + body.substr(0, kReplyExcerpt) +
                           "; expected a JSON list of numbers or {\"rewards\": [...]}");
  }
  std::vector<double> scores;
  for (const nlohmann::json& value : *list) {
    if (!value.is_number()) {
      throw sdk::PluginError("reward server " + label + " replied " + value.dump() + " for completion #" +
                             std::to_string(scores.size() + 1) + "; expected a number");
    }
    scores.push_back(value.get<double>());
  }
  return scores;
}

class HttpRewardFunction final : public sdk::RewardFunction {
 public:
  explicit HttpRewardFunction(HttpEndpoint endpoint)
      : endpoint_(std::move(endpoint)), label_("'" + endpoint_.url + "'") {}

  std::string name() const override { return endpoint_.url; }

  std::vector<double> score(const std::vector<sdk::RewardInput>& inputs) override {
    const std::string body = reward_batch_text(inputs);
    std::string failure;
    for (int64_t attempt = 0; attempt <= endpoint_.retries; ++attempt) {
      if (attempt > 0) {
        log::warn("rewards", "reward server " + label_ + ": " + failure + "; retry " + std::to_string(attempt) +
                                 " of " + std::to_string(endpoint_.retries));
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(100LL << (attempt - 1), 5000)));
      }
      HttpReply reply;
      try {
        reply = post_json(endpoint_, body);
      } catch (const HttpFailure& error) {
        failure = error.what();
        continue;
      }
      if (reply.status >= 500) {
        failure = "status " + std::to_string(reply.status) + " (" + reply.body.substr(0, kReplyExcerpt) + ")";
        continue;
      }
      if (reply.status != 200) {
        throw sdk::PluginError("reward server " + label_ + " refused the batch: status " +
                               std::to_string(reply.status) + " (" + reply.body.substr(0, kReplyExcerpt) + ")");
      }
      const std::vector<double> scores = scores_in_reply(label_, reply.body);
      check_reward_scores("at " + label_, scores, inputs);
      return scores;
    }
    throw sdk::PluginError("reward server " + label_ + ": " + std::to_string(endpoint_.retries + 1) +
                           " attempts failed; the last: " + failure);
  }

 private:
  HttpEndpoint endpoint_;
  std::string label_;
};

class HttpRewardLibrary final : public sdk::RewardLibrary {
 public:
  explicit HttpRewardLibrary(HttpEndpoint endpoint) : endpoint_(std::move(endpoint)) {}
  std::string name() const override { return endpoint_.url; }
  std::string path() const override { return endpoint_.url; }
  std::vector<std::string> function_names() const override { return {endpoint_.url}; }
  std::unique_ptr<sdk::RewardFunction> create(const std::string& function_name) const override {
    if (function_name != endpoint_.url) {
      throw sdk::ConfigError("reward server '" + endpoint_.url + "' offers one function, named by its URL, not '" +
                             function_name + "'");
    }
    return std::make_unique<HttpRewardFunction>(endpoint_);
  }

 private:
  HttpEndpoint endpoint_;
};

}  // namespace

std::unique_ptr<sdk::RewardLibrary> open_http_reward(const std::string& url) {
  return std::make_unique<HttpRewardLibrary>(parse_http_endpoint(url));
}

}  // namespace ptrain::rewards
