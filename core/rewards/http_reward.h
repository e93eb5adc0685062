// A reward server reached over HTTP, as OpenRLHF's remote reward models and
// verl's sandbox rewards are: once per scoring, POST the batch
// (reward_batch.h's JSON object of parallel lists) to the URL and read back
// one number per completion, as a JSON list or as {"rewards": [...]}.
//
// A failed attempt (no connection, no reply within timeout_s, a 5xx status)
// is retried up to `retries` times, waiting 0.1 s, 0.2 s, 0.4 s, ... (at
// most 5 s) in between; any other status or a reply that is not such JSON
// stops at once.
#pragma once

#include "ptrain/sdk/rewards.h"

#include <memory>
#include <string>

namespace ptrain::rewards {

// A library of one function, named by the URL as written. Throws
// sdk::ConfigError naming the URL when it does not parse (http_endpoint.h).
// The function's score() throws sdk::PluginError naming the URL: every
// attempt failed (the last reason), a refusing status (with the reply's
// start), a reply that is not a list of numbers, the wrong number of scores,
// a non-finite one.
std::unique_ptr<sdk::RewardLibrary> open_http_reward(const std::string& url);

}  // namespace ptrain::rewards
