// Scripted multi-turn episodes for the GRPO environment tests: a rollout
// engine that answers each (prompt, generation, turn) with a fixed turn, an
// environment with fixed rules, and, written out by hand, the tokens and
// policy masks those episodes must have under the "plain" chat template.
#pragma once

#include "core/tokenizer/byte_tokenizer.h"
#include "ptrain/sdk/environment.h"
#include "ptrain/sdk/generation.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::grpo_test {

// What the environment answers every "?..." turn with, and how "plain"
// renders it after an assistant turn: the user turn, then the assistant prefix.
inline constexpr const char* kObservation = "o";
inline constexpr const char* kObservationTurn = "User: o\nAssistant: ";
// The reward of an episode the environment did not end.
inline constexpr double kUnfinishedReward = -0.5;

// A turn "?..." asks for an observation; any other ends the episode with 1
// if it equals the example's answer, else 0. With `always_observe` every
// turn is answered with the observation (episodes run to max_turns).
class ScriptedEnvironment final : public sdk::Environment {
 public:
  class ScriptedEpisode final : public sdk::Episode {
   public:
    ScriptedEpisode(std::string answer, std::vector<sdk::AssistantTurn>* seen, bool always_observe)
        : answer_(std::move(answer)), seen_(seen), always_observe_(always_observe) {}
    sdk::EnvironmentReply step(const sdk::AssistantTurn& turn) override {
      seen_->push_back(turn);
      if (always_observe_ || (!turn.text.empty() && turn.text[0] == '?')) {
        return sdk::EnvironmentReply::observe(kObservation);
      }
      return sdk::EnvironmentReply::finish(turn.text == answer_ ? 1.0 : 0.0);
    }
    double unfinished_reward() override { return kUnfinishedReward; }

   private:
    std::string answer_;
    std::vector<sdk::AssistantTurn>* seen_;
    bool always_observe_;
  };

  explicit ScriptedEnvironment(bool always_observe = false) : always_observe_(always_observe) {}
  std::string name() const override { return "scripted"; }
  std::unique_ptr<sdk::Episode> start(const sdk::Example& example) override {
    return std::make_unique<ScriptedEpisode>(example.fields.at("answer").get<std::string>(), &turns_seen,
                                             always_observe_);
  }
  std::vector<sdk::AssistantTurn> turns_seen;  // every step() call, in order

 private:
  bool always_observe_;
};

// A turn's tokens: its bytes and <eos>, or, with a "…" suffix, the bytes
// alone (it reached the token limit).
inline bool turn_truncated(const std::string& text) {
  return text.size() >= 3 && text.compare(text.size() - 3, 3, "…") == 0;
}
inline std::vector<int64_t> turn_ids(const std::string& text) {
  const bool truncated = turn_truncated(text);
  const std::string body = truncated ? text.substr(0, text.size() - 3) : text;
  std::vector<int64_t> ids(body.begin(), body.end());
  if (!truncated) ids.push_back(tokenizer::ByteTokenizer::kEos);
  return ids;
}

// Answers request (prompt p, generation k, turn t) with script[p][k][t].
class ScriptedTurnEngine final : public sdk::RolloutEngine {
 public:
  explicit ScriptedTurnEngine(std::vector<std::vector<std::vector<std::string>>> script) : script_(std::move(script)) {}
  std::vector<sdk::Rollout> generate(const std::vector<sdk::RolloutRequest>& requests, const sdk::SamplingParams&,
                                     int64_t) override {
    std::vector<sdk::Rollout> rollouts;
    for (const sdk::RolloutRequest& request : requests) {
      requests_seen.push_back(request);
      const std::string& text = script_.at(static_cast<size_t>(request.prompt_index))
                                    .at(static_cast<size_t>(request.generation_index))
                                    .at(static_cast<size_t>(request.turn));
      sdk::Rollout rollout;
      rollout.completion_ids = turn_ids(text);
      rollout.stop_reason = turn_truncated(text) ? sdk::StopReason::kLength : sdk::StopReason::kEos;
      rollouts.push_back(rollout);
    }
    ++calls;
    return rollouts;
  }
  int calls = 0;
  std::vector<sdk::RolloutRequest> requests_seen;

 private:
  std::vector<std::vector<std::vector<std::string>>> script_;
};

// The episode the scripted engine and environment make of `turns` (taking
// at most max_turns of them): its tokens after the prompt and which the
// policy sampled, written from the template by hand. An episode ends at a
// turn that does not start with '?', a truncated turn, or turn max_turns.
struct ExpectedEpisode {
  std::vector<int64_t> ids;
  std::vector<uint8_t> policy;
  int64_t turns = 0;
};
inline ExpectedEpisode expected_episode(const std::vector<std::string>& turns, int64_t max_turns) {
  ExpectedEpisode episode;
  for (const std::string& turn : turns) {
    const std::vector<int64_t> ids = turn_ids(turn);
    episode.ids.insert(episode.ids.end(), ids.begin(), ids.end());
    episode.policy.insert(episode.policy.end(), ids.size(), 1);
    ++episode.turns;
    if (turn[0] != '?' || turn_truncated(turn) || episode.turns == max_turns) break;
    const std::string observation = kObservationTurn;
    episode.ids.insert(episode.ids.end(), observation.begin(), observation.end());
    episode.policy.insert(episode.policy.end(), observation.size(), 0);
  }
  return episode;
}

}  // namespace ptrain::grpo_test
