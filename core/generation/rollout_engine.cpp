#include "core/generation/rollout_engine.h"

#include "core/generation/sampling.h"
#include "core/log/progress.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/DistributionsHelper.h>

#include <algorithm>
#include <mutex>
#include <optional>

namespace ptrain::generation {
namespace {

// One sequence being decoded.
struct Row {
  size_t request = 0;           // position in the batch's requests
  std::vector<int64_t> tokens;  // prompt, then completion
  int64_t prompt_length = 0;
  int64_t limit = 0;  // max new tokens
  at::Generator generator;
};

// Left-padded [B, T] ids, rotary positions and validity of the rows' token lists.
struct PaddedRows {
  at::Tensor ids;
  at::Tensor positions;
  at::Tensor valid;
};

PaddedRows left_pad(const std::vector<Row*>& rows, int64_t pad_id) {
  int64_t longest = 0;
  for (const Row* row : rows) longest = std::max(longest, static_cast<int64_t>(row->tokens.size()));
  const auto b = static_cast<int64_t>(rows.size());
  PaddedRows padded{at::full({b, longest}, pad_id, at::kLong), at::zeros({b, longest}, at::kLong),
                    at::zeros({b, longest}, at::kBool)};
  for (int64_t i = 0; i < b; ++i) {
    const auto length = static_cast<int64_t>(rows[i]->tokens.size());
    const int64_t offset = longest - length;
    padded.ids[i].narrow(0, offset, length).copy_(at::tensor(rows[i]->tokens, at::kLong));
    padded.positions[i].narrow(0, offset, length).copy_(at::arange(length, at::kLong));
    padded.valid[i].narrow(0, offset, length).fill_(true);
  }
  return padded;
}

std::vector<const std::vector<int64_t>*> contexts(const std::vector<Row*>& rows) {
  std::vector<const std::vector<int64_t>*> out;
  for (const Row* row : rows) out.push_back(&row->tokens);
  return out;
}

// One uniform draw per row from the row's own generator, in row order; none
// when decoding is greedy. Drawn on the host, as Tensor::uniform_ draws a
// double from a CPU generator, without a tensor or a read back.
at::Tensor row_uniforms(const std::vector<Row*>& rows, const sdk::SamplingParams& params) {
  at::Tensor uniforms = at::zeros({static_cast<int64_t>(rows.size())}, at::kDouble);
  if (params.temperature == 0.0) return uniforms;
  for (size_t i = 0; i < rows.size(); ++i) {
    auto* generator = at::check_generator<at::CPUGeneratorImpl>(rows[i]->generator);
    const std::lock_guard<std::mutex> lock(generator->mutex_);
    at::uniform_real_distribution<double> uniform(0.0, 1.0);
    uniforms.data_ptr<double>()[i] = uniform(generator);
  }
  return uniforms;
}

// Each row's newest token and its position: [B, 1] each, what a cached step reads.
PaddedRows last_tokens(const std::vector<Row*>& rows) {
  const auto b = static_cast<int64_t>(rows.size());
  PaddedRows last{at::empty({b, 1}, at::kLong), at::empty({b, 1}, at::kLong), at::ones({b, 1}, at::kBool)};
  for (int64_t i = 0; i < b; ++i) {
    last.ids.data_ptr<int64_t>()[i] = rows[i]->tokens.back();
    last.positions.data_ptr<int64_t>()[i] = static_cast<int64_t>(rows[i]->tokens.size()) - 1;
  }
  return last;
}

bool contains_stop_string(const std::string& text, const std::vector<std::string>& stop_strings) {
  return std::any_of(stop_strings.begin(), stop_strings.end(),
                     [&](const std::string& stop) { return !stop.empty() && text.find(stop) != std::string::npos; });
}

// Why a row that just took a token ends there, or nullopt when it goes on.
std::optional<sdk::StopReason> stop_reason(const Row& row, const sdk::SamplingParams& params,
                                           const sdk::Tokenizer& tokenizer) {
  if (params.stop_at_eos && row.tokens.back() == tokenizer.eos_id()) return sdk::StopReason::kEos;
  if (!params.stop_strings.empty() &&
      contains_stop_string(tokenizer.decode({row.tokens.begin() + row.prompt_length, row.tokens.end()}),
                           params.stop_strings)) {
    return sdk::StopReason::kStopString;
  }
  if (static_cast<int64_t>(row.tokens.size()) - row.prompt_length >= row.limit) return sdk::StopReason::kLength;
  return std::nullopt;
}

}  // namespace

std::vector<sdk::Rollout> CausalLmRolloutEngine::generate(const std::vector<sdk::RolloutRequest>& requests,
                                                          const sdk::SamplingParams& params, int64_t max_batch) {
  std::vector<sdk::Rollout> rollouts(requests.size());
  const model::CausalLm::LayersHeldWhole whole(model_, hold_whole_model_);
  const size_t chunk = max_batch > 0 ? static_cast<size_t>(max_batch) : std::max<size_t>(1, requests.size());
  // A bar while this step's rollouts are sampled (rank 0, on a terminal).
  log::PhaseProgress progress("generate", "rollouts", static_cast<int64_t>(requests.size()));
  for (size_t begin = 0; begin < requests.size(); begin += chunk) {
    const size_t end = std::min(requests.size(), begin + chunk);
    std::vector<sdk::Rollout> part;
    generate_batch(
        {requests.begin() + static_cast<std::ptrdiff_t>(begin), requests.begin() + static_cast<std::ptrdiff_t>(end)},
        params, part);
    std::move(part.begin(), part.end(), rollouts.begin() + static_cast<std::ptrdiff_t>(begin));
    progress.advance(static_cast<int64_t>(end - begin));
  }
  progress.dismiss();
  return rollouts;
}

void CausalLmRolloutEngine::generate_batch(const std::vector<sdk::RolloutRequest>& requests,
                                           const sdk::SamplingParams& params, std::vector<sdk::Rollout>& rollouts) {
  rollouts.assign(requests.size(), sdk::Rollout{});
  const int64_t max_positions = model_.config().max_position_embeddings;
  const int64_t pad_id = std::clamp<int64_t>(tokenizer_.pad_id(), 0, model_.vocab_size() - 1);
  std::vector<Row> rows(requests.size());
  std::vector<Row*> active;
  for (size_t i = 0; i < requests.size(); ++i) {
    const sdk::RolloutRequest& request = requests[i];
    const auto prompt_length = static_cast<int64_t>(request.prompt_ids.size());
    if (prompt_length == 0 || prompt_length >= max_positions) {
      throw sdk::UsageError("rollout of prompt " + std::to_string(request.prompt_index) + ": the prompt has " +
                            std::to_string(prompt_length) + " tokens; it needs 1 to " +
                            std::to_string(max_positions - 1) + " (max_position_embeddings − 1)");
    }
    Row& row = rows[i];
    row.request = i;
    row.tokens = request.prompt_ids;
    row.prompt_length = prompt_length;
    row.limit = std::min(request.max_new_tokens >= 0 ? request.max_new_tokens : params.max_new_tokens,
                         max_positions - prompt_length);
    row.generator = at::detail::createCPUGenerator(
        sdk::rollout_seed(params.seed, params.step, request.prompt_index, request.generation_index, request.turn));
    if (row.limit > 0) active.push_back(&row);
  }
  if (active.empty()) return;

  // The first forward reads the prompts; later ones one token per row (or,
  // without the cache, every row's whole sequence again).
  PaddedRows padded = left_pad(active, pad_id);
  int64_t capacity = padded.ids.size(1);
  for (const Row* row : active) capacity = std::max(capacity, padded.ids.size(1) + row->limit);
  model::CausalLm::KvCache cache = model_.new_kv_cache(static_cast<int64_t>(active.size()), capacity);
  at::Tensor logits = model_.decode_step(padded.ids, padded.positions, padded.valid, cache);  // [A, V]
  // The repetition penalty's ids, kept on the device and updated by each step's tokens.
  at::Tensor seen = params.repetition_penalty == 1.0 ? at::Tensor()
                                                     : context_mask(contexts(active), logits.size(1), logits.options());

  while (!active.empty()) {
    const at::Tensor chosen = choose_next_tokens(logits, seen, params, row_uniforms(active, params));
    if (seen.defined()) seen.scatter_(1, chosen.unsqueeze(1), true);
    const at::Tensor tokens = chosen.to(at::kCPU);  // the step's one read back to the host
    std::vector<Row*> still_active;
    std::vector<int64_t> kept_rows;
    for (size_t a = 0; a < active.size(); ++a) {
      Row& row = *active[a];
      const int64_t token = tokens.data_ptr<int64_t>()[a];
      row.tokens.push_back(token);
      sdk::Rollout& rollout = rollouts[row.request];
      if (const std::optional<sdk::StopReason> reason = stop_reason(row, params, tokenizer_)) {
        rollout.stop_reason = *reason;
        rollout.completion_ids.assign(row.tokens.begin() + row.prompt_length, row.tokens.end());
      } else {
        still_active.push_back(&row);
        kept_rows.push_back(static_cast<int64_t>(a));
      }
    }
    if (still_active.empty()) break;
    if (still_active.size() != active.size()) {
      const at::Tensor kept = at::tensor(kept_rows, at::kLong);
      model::CausalLm::keep_cache_rows(cache, kept);
      if (seen.defined()) seen = seen.index_select(0, kept.to(seen.device()));
    }
    active = std::move(still_active);

    if (params.use_kv_cache) {
      const PaddedRows last = last_tokens(active);
      logits = model_.decode_step(last.ids, last.positions, last.valid, cache);
    } else {
      padded = left_pad(active, pad_id);
      cache = model_.new_kv_cache(padded.ids.size(0), padded.ids.size(1));
      logits = model_.decode_step(padded.ids, padded.positions, padded.valid, cache);
    }
  }
}

}  // namespace ptrain::generation
