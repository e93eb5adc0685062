#include "core/generation/completions.h"

#include "core/generation/rollout_engine.h"
#include "core/log/progress.h"
#include "ptrain/sdk/chat.h"
#include "ptrain/sdk/util/example_fields.h"
#include "ptrain/sdk/util/prompt_tokens.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>

namespace ptrain::generation {
namespace {

// Prompts a rank decodes per round: the progress line moves, and the gather's
// tensors stay small, however many prompts there are.
constexpr int64_t kPromptsPerRankRound = 64;

// log p of each completion token given everything before it, float64.
std::vector<double> completion_logprobs(model::CausalLm& model, const Completion& completion) {
  if (completion.completion_ids.empty()) return {};
  std::vector<int64_t> ids = completion.prompt_ids;
  ids.insert(ids.end(), completion.completion_ids.begin(), completion.completion_ids.end() - 1);
  const at::Tensor logits = model.logits(at::tensor(ids, at::kLong).unsqueeze(0))[0];  // [T, V]
  const auto prompt_length = static_cast<int64_t>(completion.prompt_ids.size());
  const auto length = static_cast<int64_t>(completion.completion_ids.size());
  const at::Tensor rows = logits.narrow(0, prompt_length - 1, length).to(at::kDouble).log_softmax(-1);
  const at::Tensor targets = at::tensor(completion.completion_ids, at::kLong).to(rows.device()).unsqueeze(1);
  const at::Tensor picked = rows.gather(1, targets).squeeze(1).cpu().contiguous();
  return std::vector<double>(picked.data_ptr<double>(), picked.data_ptr<double>() + length);
}

// The gather's layout: per completion row, [length, stop reason, ids...] and the logprobs.
struct RoundTensors {
  at::Tensor tokens;    // [rows, 2 + max_new_tokens] int64
  at::Tensor logprobs;  // [rows, max_new_tokens] float64
};

RoundTensors pack(const std::vector<Completion>& own, int64_t first_prompt, int64_t rows, int64_t per_prompt,
                  int64_t max_new_tokens) {
  RoundTensors packed{at::zeros({rows, 2 + max_new_tokens}, at::kLong), at::zeros({rows, max_new_tokens}, at::kDouble)};
  for (const Completion& completion : own) {
    const int64_t row = (completion.prompt - first_prompt) * per_prompt + completion.generation;
    const auto length = static_cast<int64_t>(completion.completion_ids.size());
    at::Tensor line = packed.tokens[row];
    line[0] = length;
    line[1] = static_cast<int64_t>(completion.stop_reason);
    if (length == 0) continue;
    line.narrow(0, 2, length).copy_(at::tensor(completion.completion_ids, at::kLong));
    if (!completion.logprobs.empty()) {
      packed.logprobs[row].narrow(0, 0, length).copy_(at::tensor(completion.logprobs, at::kDouble));
    }
  }
  return packed;
}

void unpack(const RoundTensors& summed, bool with_logprobs, std::vector<Completion>& round) {
  for (size_t row = 0; row < round.size(); ++row) {
    // [length, stop reason, ids...], read in place rather than one item() at a time.
    const int64_t* line = summed.tokens[static_cast<int64_t>(row)].data_ptr<int64_t>();
    round[row].completion_ids.assign(line + 2, line + 2 + line[0]);
    round[row].stop_reason = static_cast<sdk::StopReason>(line[1]);
    if (!with_logprobs) continue;
    const double* logprobs = summed.logprobs[static_cast<int64_t>(row)].data_ptr<double>();
    round[row].logprobs.assign(logprobs, logprobs + line[0]);
  }
}

// The sum over ranks, back on the host (one collective per dtype, as Gloo wants).
at::Tensor summed(const at::Tensor& tensor, at::Device device, dist::Communicator& communicator) {
  std::vector<at::Tensor> tensors{tensor.to(device)};
  communicator.all_reduce_sum(tensors);
  return tensors[0].cpu();
}

}  // namespace

std::vector<Completion> generate_completions(model::CausalLm& model, const sdk::Tokenizer& tokenizer,
                                             const std::vector<sdk::Example>& prompts,
                                             const GenerationSettings& settings, dist::Communicator& communicator) {
  const int64_t max_length = model.config().max_position_embeddings;
  const int64_t n = settings.per_prompt;
  std::vector<Completion> all;
  for (size_t i = 0; i < prompts.size(); ++i) {
    Completion first;
    first.prompt = static_cast<int64_t>(i);
    first.prompt_ids = sdk::prompt_token_ids(tokenizer, prompts[i], max_length, first.prompt_text);
    for (int64_t k = 0; k < n; ++k) {
      all.push_back(first);
      all.back().generation = k;
    }
  }
  sdk::SamplingParams sampling = settings.sampling;
  sampling.step = 0;
  CausalLmRolloutEngine engine(model, tokenizer);
  const at::NoGradGuard no_grad;
  const auto total = static_cast<int64_t>(prompts.size());
  const int64_t world = communicator.world_size();
  log::PhaseProgress progress("generate", "prompts", total);
  for (int64_t first = 0; first < total; first += kPromptsPerRankRound * world) {
    const int64_t end = std::min(total, first + kPromptsPerRankRound * world);
    std::vector<sdk::RolloutRequest> requests;
    std::vector<Completion> own;
    for (int64_t i = first; i < end; ++i) {
      if (i % world != communicator.rank()) continue;
      for (int64_t k = 0; k < n; ++k) {
        const Completion& completion = all[static_cast<size_t>(i * n + k)];
        const int64_t room = max_length - static_cast<int64_t>(completion.prompt_ids.size());
        requests.push_back({completion.prompt_ids, i, k, std::min(sampling.max_new_tokens, room)});
        own.push_back(completion);
      }
    }
    const std::vector<sdk::Rollout> rollouts = engine.generate(requests, sampling, settings.max_batch);
    for (size_t r = 0; r < own.size(); ++r) {
      own[r].completion_ids = rollouts[r].completion_ids;
      own[r].stop_reason = rollouts[r].stop_reason;
      if (settings.with_logprobs) own[r].logprobs = completion_logprobs(model, own[r]);
    }
    RoundTensors packed = pack(own, first, (end - first) * n, n, sampling.max_new_tokens);
    std::vector<Completion> round(all.begin() + first * n, all.begin() + end * n);
    unpack({summed(packed.tokens, model.device(), communicator), summed(packed.logprobs, model.device(), communicator)},
           settings.with_logprobs, round);
    std::copy(round.begin(), round.end(), all.begin() + first * n);
    progress.advance(end - first);
  }
  if (settings.show_progress) {
    progress.finish();
  } else {
    progress.dismiss();
  }
  return all;
}

std::vector<sdk::Example> held_out_prompts(const std::vector<sdk::Example>& examples) {
  std::vector<sdk::Example> prompts = examples;
  for (sdk::Example& prompt : prompts) {
    if (!sdk::has_field(prompt, "messages")) continue;
    const std::vector<sdk::ChatMessage> messages = sdk::read_messages(prompt);
    if (messages.empty() || messages.back().role != "assistant") continue;
    nlohmann::json& listed = prompt.fields["messages"];
    listed.erase(listed.size() - 1);
    if (!prompt.fields.contains("answer")) prompt.fields["answer"] = messages.back().content;
  }
  return prompts;
}

void check_prompts(const sdk::Tokenizer& tokenizer, const std::vector<sdk::Example>& prompts, int64_t max_length) {
  for (const sdk::Example& prompt : prompts) {
    std::string text;
    sdk::prompt_token_ids(tokenizer, prompt, max_length, text);
  }
}

const char* stop_reason_name(sdk::StopReason reason) {
  switch (reason) {
    case sdk::StopReason::kEos:
      return "eos";
    case sdk::StopReason::kStopString:
      return "stop_string";
    case sdk::StopReason::kLength:
      break;
  }
  return "length";
}

}  // namespace ptrain::generation
