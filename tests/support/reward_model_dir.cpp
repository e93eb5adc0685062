#include "support/reward_model_dir.h"

#include "support/test_util.h"

#include "core/model/causal_lm.h"
#include "core/model/safetensors.h"
#include "core/tokenizer/byte_tokenizer_files.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <fstream>
#include <utility>
#include <vector>

namespace ptrain::testing {

void write_tiny_reward_model(const std::filesystem::path& dir, const TinyRewardModelOptions& options) {
  std::filesystem::create_directories(dir);
  model::ModelConfig config = tiny_model_config();
  config.tie_word_embeddings = true;  // no lm_head.weight: a classifier has score.weight instead
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& [name, tensor] : model::CausalLm::init_random(config, options.seed)->named_parameters()) {
    tensors.emplace_back(name, tensor.detach().clone());
  }
  if (options.score_rows > 0) {
    at::Generator generator = at::detail::createCPUGenerator(options.seed + 1);
    tensors.emplace_back("score.weight",
                         at::empty({options.score_rows, config.hidden_size}).normal_(0.0, 1.0, generator));
  }
  if (!options.extra_tensor.empty()) {
    tensors.emplace_back(options.extra_tensor, at::zeros({config.vocab_size, config.hidden_size}));
  }
  model::write_safetensors(dir / "model.safetensors", tensors);

  nlohmann::json config_json = config.to_hf_json("float32");
  config_json["tie_word_embeddings"] = false;  // as transformers writes a Llama classifier's config
  config_json["architectures"] = {"LlamaForSequenceClassification"};
  config_json["id2label"] = {{"0", "LABEL_0"}};
  config_json["label2id"] = {{"LABEL_0", 0}};
  config_json["pad_token_id"] = 258;
  config_json.update(options.config_fields);
  std::ofstream(dir / "config.json") << config_json.dump(2) << "\n";

  if (options.tokenizer) std::ofstream(dir / "tokenizer.json") << tokenizer::byte_tokenizer_json().dump(2) << "\n";
  nlohmann::ordered_json tokenizer_config = tokenizer::byte_tokenizer_config();
  if (options.chat_template) tokenizer_config["chat_template"] = kTinyRewardChatTemplate;
  std::ofstream(dir / "tokenizer_config.json") << tokenizer_config.dump(2) << "\n";
}

}  // namespace ptrain::testing
