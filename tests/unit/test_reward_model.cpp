// Reward models (core/model/sequence_classifier.h, GRPO's reward_models):
// the score of a sequence is the score head applied to the final hidden
// state of its last non-pad token, checked against the float64
// transformers-style reference (hf_reference_model.h) with score.weight as
// a one-row head; batching and padding leave each score as it is; the GRPO
// reward renders prompt + completion with the reward model's own chat
// template and tokenizer.
#include "catch.h"

#include "hf_reference_model.h"
#include "support/reward_model_dir.h"
#include "support/run_command.h"
#include "support/test_util.h"

#include "core/model/safetensors.h"
#include "core/model/sequence_classifier.h"
#include "core/plugin/reward_model_loader.h"
#include "grpo_reward_models.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <string>
#include <vector>

using namespace ptrain;
namespace fs = std::filesystem;
namespace ref = ptrain::testing::hf_reference;

namespace {

constexpr int64_t kPad = 258;  // the tiny reward model's pad_token_id (the byte tokenizer's <pad>)

// The reference's params with score.weight as the LM head: logits then are [B, T, 1] scores.
ref::Params reference_params(const fs::path& dir) {
  std::vector<std::pair<std::string, at::Tensor>> tensors = model::read_safetensors(dir / "model.safetensors");
  for (auto& [name, tensor] : tensors) {
    if (name == "score.weight") name = "lm_head.weight";
  }
  return ref::copy_params(tensors);
}

// transformers' rule, written out: the rightmost id that is not the pad id (-1: none).
int64_t last_non_pad(const std::vector<int64_t>& ids, int64_t pad) {
  for (auto i = static_cast<int64_t>(ids.size()) - 1; i >= 0; --i) {
    if (pad < 0 || ids[static_cast<size_t>(i)] != pad) return i;
  }
  return 0;
}

double reference_score(const ref::Params& p, const std::vector<int64_t>& ids, int64_t pad) {
  model::ModelConfig c = testing::tiny_model_config();
  c.tie_word_embeddings = false;  // the head read is "lm_head.weight" = score.weight
  const auto t = static_cast<int64_t>(ids.size());
  const at::Tensor input = at::tensor(ids, at::kLong).unsqueeze(0);
  const at::Tensor positions = at::arange(t, at::kLong).unsqueeze(0);
  const at::Tensor scores = ref::logits(p, c, input, positions, at::zeros({1, t}, at::kLong));  // [1, T, 1]
  return scores[0][last_non_pad(ids, pad)][0].item<double>();
}

std::vector<int64_t> bytes_of_text(const std::string& text) {
  std::vector<int64_t> ids;
  for (const unsigned char c : text) ids.push_back(c);
  return ids;
}

std::vector<double> values(const at::Tensor& t) {
  const at::Tensor d = t.to(at::kDouble).contiguous();
  return std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
}

const std::vector<std::vector<int64_t>> kSequences = {
    bytes_of_text("user: 1+1=\nassistant: 2\n"),
    bytes_of_text("user: hi\n"),
    {65, 66, 67, 68, 69, 70, 71, kPad, kPad},  // pad ids at the end: scored at the 'G'
    bytes_of_text("a longer sequence of thirty-two"),
};

}  // namespace

TEST_CASE("reward model: the score head reads the last non-pad token's hidden state, as the reference",
          "[reward_model]") {
  const fs::path dir = testing::fresh_test_dir("reward_model_reference");
  testing::write_tiny_reward_model(dir);
  auto classifier = model::SequenceClassifier::load_hf_dir(dir, at::kCPU, at::kFloat);
  CHECK(classifier->pad_token_id() == kPad);
  const ref::Params p = reference_params(dir);
  const std::vector<double> scores = values(classifier->scores(kSequences));
  REQUIRE(scores.size() == kSequences.size());
  for (size_t i = 0; i < kSequences.size(); ++i) {
    const double expected = reference_score(p, kSequences[i], kPad);
    INFO("sequence " << i << ": score " << scores[i] << ", reference " << expected);
    CHECK(std::abs(scores[i] - expected) < 1e-4 * std::max(1.0, std::abs(expected)));
  }
  // Scores that differ from sequence to sequence: the comparison tests the inputs' effect.
  CHECK(std::abs(scores[0] - scores[1]) > 1e-2);
  // Read at the last position instead, the padded sequence's score would differ.
  std::vector<int64_t> no_pad_rule = kSequences[2];
  CHECK(std::abs(reference_score(p, no_pad_rule, -1) - scores[2]) > 1e-3);
}

TEST_CASE("reward model: scores do not depend on the batch, its order or trailing padding", "[reward_model]") {
  const fs::path dir = testing::fresh_test_dir("reward_model_batching");
  testing::write_tiny_reward_model(dir);
  auto classifier = model::SequenceClassifier::load_hf_dir(dir, at::kCPU, at::kFloat);
  const std::vector<double> batched = values(classifier->scores(kSequences));
  std::vector<std::vector<int64_t>> reversed(kSequences.rbegin(), kSequences.rend());
  const std::vector<double> reversed_scores = values(classifier->scores(reversed));
  for (size_t i = 0; i < kSequences.size(); ++i) {
    INFO("sequence " << i);
    const double alone = values(classifier->scores({kSequences[i]}))[0];
    CHECK(std::abs(alone - batched[i]) < 1e-5);
    CHECK(std::abs(reversed_scores[kSequences.size() - 1 - i] - batched[i]) < 1e-5);
    std::vector<int64_t> padded = kSequences[i];
    padded.insert(padded.end(), 5, kPad);  // a caller's right padding: ignored by the last-non-pad rule
    CHECK(std::abs(values(classifier->scores({padded}))[0] - batched[i]) < 1e-5);
  }
}

TEST_CASE("reward model: without pad_token_id the last token is scored", "[reward_model]") {
  const fs::path dir = testing::fresh_test_dir("reward_model_no_pad");
  testing::TinyRewardModelOptions options;
  options.config_fields = {{"pad_token_id", nullptr}};
  testing::write_tiny_reward_model(dir, options);
  auto classifier = model::SequenceClassifier::load_hf_dir(dir, at::kCPU, at::kFloat);
  CHECK(classifier->pad_token_id() == -1);
  const double score = values(classifier->scores({kSequences[2]}))[0];
  CHECK(std::abs(score - reference_score(reference_params(dir), kSequences[2], -1)) < 1e-4);
}

TEST_CASE("reward model reward: prompt and completion rendered with the model's own template and tokenizer",
          "[reward_model][grpo]") {
  const fs::path dir = testing::fresh_test_dir("reward_model_reward");
  testing::write_tiny_reward_model(dir);
  std::unique_ptr<sdk::RewardModel> model = plugin::load_reward_model(dir.string(), at::kCPU, at::kFloat);
  REQUIRE(model->tokenizer().chat_template() != nullptr);

  const sdk::Example plain{0, "prompts.jsonl:1", {{"prompt", "1+1="}, {"answer", "2"}}};
  const sdk::Example chat{
      1,
      "prompts.jsonl:2",
      {{"messages", {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "hi"}}}}}};
  const std::vector<sdk::RewardInput> inputs = {
      {&plain, "1+1=", "2", 2, false}, {&chat, "", "hello", 6, false}, {&plain, "1+1=", "3", 2, false}};
  // The template writes "<role>: <content>\n" per message; the byte tokenizer's ids are the bytes.
  const std::vector<std::string> texts = {
      "user: 1+1=\nassistant: 2\n", "system: Be brief.\nuser: hi\nassistant: hello\n", "user: 1+1=\nassistant: 3\n"};
  for (size_t i = 0; i < inputs.size(); ++i) {
    CHECK(grpo::reward_model_input(model->tokenizer(), inputs[i]) == bytes_of_text(texts[i]));
  }
  CHECK(grpo::reward_model_name(dir.string() + "/") == dir.filename().string());

  // Two sequences per forward pass: the chunking must not change a score.
  std::unique_ptr<sdk::RewardFunction> reward = grpo::make_reward_model_reward(std::move(model), "rm", 2);
  CHECK(reward->name() == "rm");
  const std::vector<double> scores = reward->score(inputs);
  const ref::Params p = reference_params(dir);
  REQUIRE(scores.size() == inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    INFO(texts[i]);
    CHECK(std::abs(scores[i] - reference_score(p, bytes_of_text(texts[i]), kPad)) < 1e-4);
  }
}

TEST_CASE("reward model: bfloat16 weights load as stored and score as the reference of those weights",
          "[reward_model]") {
  const fs::path dir = testing::fresh_test_dir("reward_model_bf16");
  testing::write_tiny_reward_model(dir);
  std::vector<std::pair<std::string, at::Tensor>> tensors = model::read_safetensors(dir / "model.safetensors");
  for (auto& [name, tensor] : tensors) tensor = tensor.to(at::kBFloat16);
  model::write_safetensors(dir / "model.safetensors", tensors);

  auto classifier = model::SequenceClassifier::load_hf_dir(dir, at::kCPU, at::kFloat);
  CHECK(classifier->stored_dtype() == at::kBFloat16);
  const ref::Params p = reference_params(dir);  // the bfloat16 values, widened to float64
  const std::vector<double> scores = values(classifier->scores(kSequences));
  for (size_t i = 0; i < kSequences.size(); ++i) {
    CHECK(std::abs(scores[i] - reference_score(p, kSequences[i], kPad)) < 1e-4);
  }
}
