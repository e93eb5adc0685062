// Peak memory of one forward + backward through the token log-probs of a
// large-vocabulary model, in one of three modes (one mode per process, so each
// peak RSS is its own):
//   hidden  the model up to its final norm, no vocabulary projection: the
//           floor the other two modes are compared against
//   target  ptrain's CausalLm::target_log_probs (what every plugin calls)
//   full    the textbook path: logits [N, V], log_softmax over the whole
//           vocabulary, gather the targets
// The "extra memory" of a path is its peak RSS minus the hidden mode's.
// Every position is a trained target (the worst case for ptrain, whose
// projection only covers trained rows), so the figure measures how the
// log-softmax is computed, not how many rows are masked.
//
//   build/bin/bench_log_prob_memory {hidden|target|full} [vocab] [batch] [seq] [threads]
//
// Prints one JSON object: {"mode", "tokens", "vocab", "peak_rss_mb", "seconds"}.
#include "core/model/causal_lm.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace ptrain;

namespace {

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "target";
  const int64_t vocab = argc > 2 ? std::atoll(argv[2]) : 32000;
  const int64_t batch = argc > 3 ? std::atoll(argv[3]) : 8;
  const int64_t seq = argc > 4 ? std::atoll(argv[4]) : 512;
  at::set_num_threads(argc > 5 ? std::atoi(argv[5]) : 2);
  if (mode != "hidden" && mode != "target" && mode != "full") {
    std::fprintf(stderr, "mode must be hidden, target or full, got '%s'\n", mode.c_str());
    return 2;
  }

  // One small layer: the vocabulary projection, not the trunk, dominates.
  model::ModelConfig config;
  config.vocab_size = vocab;
  config.hidden_size = 256;
  config.intermediate_size = 688;
  config.num_layers = 1;
  config.num_heads = 4;
  config.num_kv_heads = 2;
  config.max_position_embeddings = seq + 1;
  config.tie_word_embeddings = true;
  auto model = model::CausalLm::init_random(config, 0);

  const at::Tensor sequence = at::randint(vocab, {batch, seq + 1}, at::kLong);  // [B, T+1]
  sdk::TokenBatch tokens;
  tokens.input_ids = sequence.narrow(1, 0, seq).contiguous();   // [B, T]
  tokens.target_ids = sequence.narrow(1, 1, seq).contiguous();  // [B, T]
  tokens.loss_mask = at::ones({batch, seq}, at::kBool);         // [B, T]

  const auto start = std::chrono::steady_clock::now();
  at::Tensor nll_sum;
  if (mode == "hidden") {
    nll_sum = model->hidden_states(tokens.input_ids, {}, {}).sum();
  } else if (mode == "target") {
    nll_sum = -model->target_log_probs(tokens).log_probs.sum();
  } else {
    const at::Tensor log_probs = at::log_softmax(model->logits(tokens.input_ids), -1);  // [B, T, V]
    nll_sum = -log_probs.gather(-1, tokens.target_ids.unsqueeze(-1)).sum();
  }
  nll_sum.backward();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::printf("{\"mode\": \"%s\", \"tokens\": %lld, \"vocab\": %lld, \"peak_rss_mb\": %.1f, \"seconds\": %.3f}\n",
              mode.c_str(), static_cast<long long>(batch * seq), static_cast<long long>(vocab), peak_rss_mb(),
              seconds);
  return 0;
}
