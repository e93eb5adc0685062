#include "core/plugin/reward_model_loader.h"

#include "core/model/sequence_classifier.h"
#include "core/tokenizer/hf_tokenizer.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <optional>

namespace ptrain::plugin {
namespace {

namespace fs = std::filesystem;

class HostRewardModel final : public sdk::RewardModel {
 public:
  HostRewardModel(std::string directory, std::unique_ptr<model::SequenceClassifier> classifier,
                  std::unique_ptr<tokenizer::HfTokenizer> tokenizer)
      : directory_(std::move(directory)), classifier_(std::move(classifier)), tokenizer_(std::move(tokenizer)) {}

  std::string directory() const override { return directory_; }
  const sdk::Tokenizer& tokenizer() const override { return *tokenizer_; }
  std::vector<double> score(const std::vector<std::vector<int64_t>>& sequences) override {
    if (sequences.empty()) return {};
    // [B], read on the host: the classifier computes on the run's device.
    const at::Tensor scores = classifier_->scores(sequences).to(at::kCPU, at::kDouble).contiguous();
    const double* data = scores.data_ptr<double>();
    return std::vector<double>(data, data + scores.numel());
  }

 private:
  std::string directory_;
  std::unique_ptr<model::SequenceClassifier> classifier_;
  std::unique_ptr<tokenizer::HfTokenizer> tokenizer_;
};

// The directory's tokenizer with its own chat template, checked against the model's vocabulary.
std::unique_ptr<tokenizer::HfTokenizer> reward_model_tokenizer(const fs::path& dir, int64_t model_vocab_size) {
  const fs::path tokenizer_json = dir / "tokenizer.json";
  if (!fs::exists(tokenizer_json)) {
    throw sdk::ConfigError(tokenizer_json.string() +
                           ": no such file (a reward model scores text with its own tokenizer: copy its "
                           "tokenizer.json and tokenizer_config.json into the directory)");
  }
  std::unique_ptr<tokenizer::HfTokenizer> tokenizer = tokenizer::HfTokenizer::load(tokenizer_json);
  std::optional<sdk::ChatTemplate> chat_template = tokenizer->own_chat_template();
  if (!chat_template) {
    throw sdk::ConfigError((dir / "tokenizer_config.json").string() +
                           ": no chat_template (a reward model reads the prompt and the completion as a "
                           "conversation rendered with its own chat template)");
  }
  tokenizer->set_chat_template(std::move(chat_template));
  if (tokenizer->vocab_size() > model_vocab_size) {
    throw sdk::ConfigError(tokenizer_json.string() + ": the tokenizer has " + std::to_string(tokenizer->vocab_size()) +
                           " ids, more than the reward model's vocab_size " + std::to_string(model_vocab_size) + " (" +
                           (dir / "config.json").string() + ")");
  }
  return tokenizer;
}

}  // namespace

std::unique_ptr<sdk::RewardModel> load_reward_model(const std::string& model_dir, at::Device device,
                                                    at::ScalarType compute_dtype,
                                                    const std::function<void(model::CausalLm&)>& on_decoder) {
  std::unique_ptr<model::SequenceClassifier> classifier =
      model::SequenceClassifier::load_hf_dir(model_dir, device, compute_dtype);
  if (on_decoder) on_decoder(classifier->decoder());
  std::unique_ptr<tokenizer::HfTokenizer> tokenizer =
      reward_model_tokenizer(model_dir, classifier->config().vocab_size);
  return std::make_unique<HostRewardModel>(model_dir, std::move(classifier), std::move(tokenizer));
}

}  // namespace ptrain::plugin
