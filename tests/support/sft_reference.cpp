#include "support/sft_reference.h"

#include "core/tokenizer/byte_tokenizer.h"

#include <ATen/ATen.h>

#include <cmath>

namespace ptrain::testing {
namespace {

struct SequenceLoss {
  at::Tensor nll_sum;  // differentiable scalar
  int64_t trained_tokens = 0;
};

// Position t predicts token t+1, trained iff token t+1 is a completion byte or <eos>.
SequenceLoss sequence_loss(model::CausalLm& model, const PromptCompletion& pair, int64_t max_length) {
  std::vector<int64_t> tokens{tokenizer::ByteTokenizer::kBos};
  for (unsigned char byte : pair.prompt) tokens.push_back(byte);
  const auto completion_start = static_cast<int64_t>(tokens.size());
  for (unsigned char byte : pair.completion) tokens.push_back(byte);
  tokens.push_back(tokenizer::ByteTokenizer::kEos);
  if (static_cast<int64_t>(tokens.size()) > max_length) tokens.resize(max_length);

  const auto length = static_cast<int64_t>(tokens.size());
  const at::Tensor input = at::tensor(std::vector<int64_t>(tokens.begin(), tokens.end() - 1), at::kLong).unsqueeze(0);
  const at::Tensor log_probs = at::log_softmax(model.logits(input)[0], /*dim=*/-1);  // [T-1, V]
  SequenceLoss loss{at::zeros({}, at::kFloat), 0};
  for (int64_t t = 0; t + 1 < length; ++t) {
    if (t + 1 < completion_start) continue;
    loss.nll_sum = loss.nll_sum - log_probs[t][tokens[t + 1]];
    ++loss.trained_tokens;
  }
  return loss;
}

}  // namespace

at::Tensor reference_sft_step_loss(model::CausalLm& model, const std::vector<PromptCompletion>& batch,
                                   const sdk::AggregationSpec& spec, int64_t max_length) {
  at::Tensor total = at::zeros({}, at::kFloat);
  int64_t tokens = 0;
  int64_t sequences = 0;
  for (const PromptCompletion& pair : batch) {
    const SequenceLoss loss = sequence_loss(model, pair, max_length);
    if (loss.trained_tokens == 0) continue;
    tokens += loss.trained_tokens;
    ++sequences;
    switch (spec.mode) {
      case sdk::LossAggregation::kSeqMeanTokenMean:
        total = total + loss.nll_sum / static_cast<double>(loss.trained_tokens);
        break;
      case sdk::LossAggregation::kSeqMeanTokenSumNorm:
        total = total + loss.nll_sum / spec.norm_constant;
        break;
      default:
        total = total + loss.nll_sum;
    }
  }
  switch (spec.mode) {
    case sdk::LossAggregation::kTokenMean: return total / static_cast<double>(tokens);
    case sdk::LossAggregation::kSum: return total;
    default: return total / static_cast<double>(sequences);
  }
}

std::vector<at::Tensor> reference_sft_gradients(model::CausalLm& model, const std::vector<PromptCompletion>& batch,
                                                const sdk::AggregationSpec& spec, int64_t max_length) {
  std::vector<at::Tensor> parameters;
  for (const auto& [name, parameter] : model.named_parameters()) {
    parameter.mutable_grad() = at::Tensor();
    parameters.push_back(parameter);
  }
  reference_sft_step_loss(model, batch, spec, max_length).backward();
  std::vector<at::Tensor> grads;
  for (const at::Tensor& parameter : parameters) grads.push_back(parameter.grad().detach().clone());
  return grads;
}

double relative_error(const std::vector<at::Tensor>& actual, const std::vector<at::Tensor>& expected) {
  double diff = 0.0;
  double norm = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    diff += (actual[i].to(at::kDouble) - expected[i].to(at::kDouble)).pow(2).sum().item<double>();
    norm += expected[i].to(at::kDouble).pow(2).sum().item<double>();
  }
  return std::sqrt(diff / norm);
}

}  // namespace ptrain::testing
