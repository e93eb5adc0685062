#include "grpo_episodes.h"

#include "ptrain/sdk/errors.h"

#include <algorithm>
#include <cmath>
#include <memory>

namespace ptrain::grpo {
namespace {

// Content of the probe's assistant turn: one letter no template trims or escapes.
constexpr const char* kProbeContent = "x";

// One live episode: its environment state and its tokens so far.
struct Live {
  size_t request = 0;
  std::unique_ptr<sdk::Episode> episode;
  sdk::Rollout rollout;  // completion_ids: the episode after the prompt
  EpisodeOutcome outcome;
};

const sdk::ChatTemplate& required_chat(const sdk::Tokenizer& tokenizer) {
  const sdk::ChatTemplate* chat = tokenizer.chat_template();
  if (chat == nullptr) {
    throw sdk::ConfigError(
        "grpo: module.environment renders observations as chat turns, but the run's tokenizer has no chat "
        "template; set tokenizer.chat_template");
  }
  return *chat;
}

double checked_reward(double reward, const sdk::Environment& environment, const sdk::Example& example) {
  if (!std::isfinite(reward)) {
    throw sdk::PluginError("grpo: environment '" + environment.name() + "' gave an episode of " + example.location +
                           " the reward " + std::to_string(reward) + "; rewards must be finite");
  }
  return reward;
}

// The turn's text as the environment reads it: special tokens and the end-of-turn marker dropped.
std::string turn_text(const sdk::Tokenizer& tokenizer, const std::vector<int64_t>& ids, const EndOfTurn& end) {
  std::string text = tokenizer.decode(ids);
  if (!end.text.empty() && text.size() >= end.text.size() &&
      text.compare(text.size() - end.text.size(), end.text.size(), end.text) == 0) {
    text.resize(text.size() - end.text.size());
  }
  return text;
}

// Turn t's request of a live episode: the prompt and the episode so far, the
// room left (a turn takes at most `turn_limit` tokens of it).
sdk::RolloutRequest turn_request(const sdk::RolloutRequest& first, const Live& live, int64_t turn, int64_t turn_limit) {
  sdk::RolloutRequest request = first;
  const std::vector<int64_t>& so_far = live.rollout.completion_ids;
  request.prompt_ids.insert(request.prompt_ids.end(), so_far.begin(), so_far.end());
  request.max_new_tokens = std::min(turn_limit, first.max_new_tokens - static_cast<int64_t>(so_far.size()));
  request.turn = turn;
  return request;
}

// Takes a sampled turn into the episode and asks the environment; false when the episode ended.
bool advance(sdk::Context& ctx, sdk::Environment& environment, const sdk::ChatTemplate& chat, const EndOfTurn& end,
             const sdk::Example& example, int64_t room, int64_t turn, bool last, const sdk::Rollout& sampled,
             Live& live) {
  std::vector<int64_t>& ids = live.rollout.completion_ids;
  ids.insert(ids.end(), sampled.completion_ids.begin(), sampled.completion_ids.end());
  live.outcome.policy_mask.insert(live.outcome.policy_mask.end(), sampled.completion_ids.size(), 1);
  live.outcome.turns = turn + 1;
  live.rollout.stop_reason = sampled.stop_reason;
  if (sampled.truncated()) {
    live.outcome.reward = checked_reward(live.episode->unfinished_reward(), environment, example);
    return false;
  }
  const sdk::EnvironmentReply reply =
      live.episode->step({turn_text(ctx.tokenizer(), sampled.completion_ids, end), turn, last});
  if (reply.done || last) {
    live.outcome.ended_by_environment = reply.done;
    live.outcome.reward =
        checked_reward(reply.done ? reply.reward : live.episode->unfinished_reward(), environment, example);
    return false;
  }
  const std::vector<int64_t> observation =
      observation_ids(ctx.tokenizer(), chat, reply.observation, reply.role, example.location);
  // The observation and at least one token of the next turn must fit.
  if (static_cast<int64_t>(ids.size() + observation.size()) + 1 > room) {
    live.rollout.stop_reason = sdk::StopReason::kLength;
    live.outcome.reward = checked_reward(live.episode->unfinished_reward(), environment, example);
    return false;
  }
  ids.insert(ids.end(), observation.begin(), observation.end());
  live.outcome.policy_mask.insert(live.outcome.policy_mask.end(), observation.size(), 0);
  return true;
}

}  // namespace

EndOfTurn end_of_turn(const sdk::ChatTemplate& chat) {
  const std::vector<sdk::ChatSegment> segments =
      chat.render({{"user", "?"}, {"assistant", kProbeContent}}, false, "the chat template's end-of-turn probe");
  EndOfTurn end;
  std::string trained;
  for (const sdk::ChatSegment& segment : segments) {
    if (!segment.trainable) continue;
    if (segment.kind == sdk::ChatSegment::Kind::kEos) end.eos = true;
    if (segment.kind == sdk::ChatSegment::Kind::kText) trained += segment.text;
  }
  const size_t content = trained.find(kProbeContent);
  if (content != std::string::npos) end.text = trained.substr(content + 1);
  return end;
}

std::vector<int64_t> observation_ids(const sdk::Tokenizer& tokenizer, const sdk::ChatTemplate& chat,
                                     const std::string& observation, const std::string& role,
                                     const std::string& location) {
  const std::vector<sdk::ChatSegment> segments =
      chat.render({{"user", "?"}, {"assistant", kProbeContent}, {role, observation}}, true, location);
  // Everything after the assistant turn's trained segments (its content and suffix).
  size_t first = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    if (segments[i].trainable) first = i + 1;
  }
  return sdk::tokenize_chat(tokenizer, {segments.begin() + static_cast<std::ptrdiff_t>(first), segments.end()}).ids;
}

std::vector<sdk::Rollout> run_episodes(sdk::Context& ctx, sdk::Environment& environment, const GrpoConfig& config,
                                       const std::vector<const sdk::Example*>& examples,
                                       const std::vector<sdk::RolloutRequest>& requests,
                                       const sdk::SamplingParams& sampling, std::vector<EpisodeOutcome>& outcomes) {
  const sdk::ChatTemplate& chat = required_chat(ctx.tokenizer());
  const EndOfTurn end = end_of_turn(chat);
  sdk::SamplingParams turn_sampling = sampling;
  std::vector<std::string>& stops = turn_sampling.stop_strings;
  if (!end.text.empty() && std::find(stops.begin(), stops.end(), end.text) == stops.end()) stops.push_back(end.text);

  std::vector<Live> episodes(requests.size());
  std::vector<size_t> live;
  for (size_t i = 0; i < requests.size(); ++i) {
    episodes[i].request = i;
    episodes[i].episode = environment.start(*examples[i]);
    live.push_back(i);
  }
  for (int64_t turn = 0; turn < config.max_turns && !live.empty(); ++turn) {
    std::vector<sdk::RolloutRequest> turn_requests;
    for (const size_t i : live) {
      turn_requests.push_back(turn_request(requests[i], episodes[i], turn, sampling.max_new_tokens));
    }
    const std::vector<sdk::Rollout> sampled =
        ctx.rollout_engine().generate(turn_requests, turn_sampling, config.generation_batch_size);
    std::vector<size_t> going_on;
    for (size_t a = 0; a < live.size(); ++a) {
      const size_t i = live[a];
      if (advance(ctx, environment, chat, end, *examples[i], requests[i].max_new_tokens, turn,
                  turn + 1 == config.max_turns, sampled[a], episodes[i])) {
        going_on.push_back(i);
      }
    }
    live = std::move(going_on);
  }
  std::vector<sdk::Rollout> rollouts;
  outcomes.clear();
  for (Live& episode : episodes) {
    rollouts.push_back(std::move(episode.rollout));
    outcomes.push_back(std::move(episode.outcome));
  }
  return rollouts;
}

}  // namespace ptrain::grpo
