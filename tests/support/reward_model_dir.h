// A tiny reward model directory for tests, as transformers saves a
// LlamaForSequenceClassification: config.json (architectures, id2label with
// one label, pad_token_id = 258, the byte tokenizer's <pad>), model.safetensors
// (the decoder of tiny_model_config() without lm_head, and score.weight
// [1, hidden]), and the byte tokenizer's Hugging Face files with a chat
// template ("<role>: <content>\n" per message). Options break one part at a
// time, for the bad-input cases.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>

namespace ptrain::testing {

// The chat template written into tokenizer_config.json.
inline const char* kTinyRewardChatTemplate =
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}";

struct TinyRewardModelOptions {
  uint64_t seed = 3;
  int64_t score_rows = 1;                                   // score.weight's rows; 0: no score.weight
  nlohmann::json config_fields = nlohmann::json::object();  // merged over config.json
  bool tokenizer = true;                                    // write tokenizer.json
  bool chat_template = true;                                // write tokenizer_config.json's chat_template
  std::string extra_tensor;  // a [vocab_size, hidden_size] tensor of this name besides the model's; empty: none
};

void write_tiny_reward_model(const std::filesystem::path& dir, const TinyRewardModelOptions& options = {});

}  // namespace ptrain::testing
