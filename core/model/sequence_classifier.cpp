#include "core/model/sequence_classifier.h"

#include "core/model/gemm.h"
#include "core/model/parameter_names.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace ptrain::model {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_config_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw sdk::ModelError(path.string() + ": cannot open (a reward model directory needs its config.json)");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw sdk::ModelError(path.string() + ": not valid JSON: " + e.what());
  }
}

// architectures must name a *ForSequenceClassification class: a causal LM's
// directory has no score head, and a token classifier scores every token.
void check_architecture(const nlohmann::json& config, const std::string& source) {
  const nlohmann::json* list = config.contains("architectures") ? &config["architectures"] : nullptr;
  if (list != nullptr && list->is_array()) {
    for (const nlohmann::json& name : *list) {
      if (name.is_string() && ends_with(name.get<std::string>(), "ForSequenceClassification")) return;
    }
  }
  throw sdk::ModelError(source +
                        ": key 'architectures': expected a sequence-classification model (e.g. "
                        "[\"LlamaForSequenceClassification\"]), got " +
                        (list != nullptr ? list->dump() : std::string("no such key")));
}

// transformers writes the labels as id2label (num_labels is derived from it)
// and reads num_labels when given; without either, it assumes 2.
int64_t label_count(const nlohmann::json& config, const std::string& source) {
  if (config.contains("num_labels")) {
    if (!config["num_labels"].is_number_integer()) {
      throw sdk::ModelError(source + ": key 'num_labels': expected an integer, got " + config["num_labels"].dump());
    }
    return config["num_labels"].get<int64_t>();
  }
  if (config.contains("id2label") && config["id2label"].is_object()) {
    return static_cast<int64_t>(config["id2label"].size());
  }
  return 2;
}

int64_t pad_token_of(const nlohmann::json& config, const std::string& source) {
  if (!config.contains("pad_token_id") || config["pad_token_id"].is_null()) return -1;
  const nlohmann::json& pad = config["pad_token_id"];
  if (!pad.is_number_integer() || pad.get<int64_t>() < 0) {
    throw sdk::ModelError(source + ": key 'pad_token_id': expected a token id or null, got " + pad.dump());
  }
  return pad.get<int64_t>();
}

// score.weight [1, H] as float32 on `device`; the directory must hold nothing else.
at::Tensor take_score_weight(const fs::path& dir, std::map<std::string, at::Tensor>& rest, int64_t hidden_size,
                             at::Device device) {
  auto it = rest.find("score.weight");
  if (it == rest.end()) {
    throw sdk::ModelError(dir.string() + ": tensor 'score.weight' is missing (expected shape [1, " +
                          std::to_string(hidden_size) + "]: the reward head)");
  }
  const at::Tensor stored = it->second;
  rest.erase(it);
  if (stored.dim() != 2 || stored.size(0) != 1 || stored.size(1) != hidden_size) {
    std::ostringstream shape;
    shape << stored.sizes();
    throw sdk::ModelError(dir.string() + ": tensor 'score.weight' has shape " + shape.str() + ", expected [1, " +
                          std::to_string(hidden_size) + "]");
  }
  if (!at::isFloatingType(stored.scalar_type())) {
    throw sdk::ModelError(dir.string() + ": tensor 'score.weight' has dtype " + c10::toString(stored.scalar_type()) +
                          ", expected a floating type");
  }
  for (const auto& [name, tensor] : rest) {
    if (ends_with(name, ".rotary_emb.inv_freq")) continue;  // recomputed from rope_theta, as in load_hf_dir
    throw sdk::ModelError(dir.string() + ": unexpected tensor '" + name +
                          "' for a sequence classifier (expected the decoder's tensors and score.weight)");
  }
  return stored.to(device).to(at::kFloat).contiguous();
}

}  // namespace

SequenceClassifier::SequenceClassifier(std::unique_ptr<CausalLm> decoder, at::Tensor score_weight, int64_t pad_token_id)
    : decoder_(std::move(decoder)), score_weight_(std::move(score_weight)), pad_token_id_(pad_token_id) {}

std::unique_ptr<SequenceClassifier> SequenceClassifier::load_hf_dir(const fs::path& dir, at::Device device,
                                                                    at::ScalarType compute_dtype) {
  if (!fs::is_directory(dir)) throw sdk::ModelError(dir.string() + ": reward model directory does not exist");
  const fs::path config_path = dir / "config.json";
  const std::string source = config_path.string();
  const nlohmann::json json = read_config_json(config_path);
  check_architecture(json, source);
  const int64_t labels = label_count(json, source);
  if (labels != 1) {
    throw sdk::ModelError(source + ": key 'num_labels': a reward model has one label (one score), got " +
                          std::to_string(labels) +
                          " (num_labels, or the entries of id2label; 2 when neither is given)");
  }
  const int64_t pad_token_id = pad_token_of(json, source);
  ModelConfig config = ModelConfig::from_hf_json(json, source);
  if (pad_token_id >= config.vocab_size) {
    throw sdk::ModelError(source + ": key 'pad_token_id': " + std::to_string(pad_token_id) +
                          " is not below vocab_size " + std::to_string(config.vocab_size));
  }
  // The head is score.weight: no lm_head.weight is read, whatever config.json says.
  config.tie_word_embeddings = true;
  std::map<std::string, at::Tensor> rest;
  std::unique_ptr<CausalLm> decoder = CausalLm::load_hf_decoder(dir, config, device, rest);
  at::Tensor score_weight = take_score_weight(dir, rest, config.hidden_size, device);
  // Frozen: the same tensors stop recording gradients (no copy of the weights).
  for (auto& [name, tensor] : decoder->named_parameters()) tensor.requires_grad_(false);
  decoder->set_compute_dtype(compute_dtype);
  return std::unique_ptr<SequenceClassifier>(
      new SequenceClassifier(std::move(decoder), std::move(score_weight), pad_token_id));
}

int64_t SequenceClassifier::scored_position(const std::vector<int64_t>& ids) const {
  if (pad_token_id_ < 0) return static_cast<int64_t>(ids.size()) - 1;
  for (auto i = static_cast<int64_t>(ids.size()) - 1; i >= 0; --i) {
    if (ids[static_cast<size_t>(i)] != pad_token_id_) return i;
  }
  return 0;
}

at::Tensor SequenceClassifier::scores(const std::vector<std::vector<int64_t>>& sequences) {
  TORCH_CHECK(!sequences.empty(), "SequenceClassifier::scores: no sequences");
  size_t longest = 0;
  for (const std::vector<int64_t>& ids : sequences) {
    TORCH_CHECK(!ids.empty(), "SequenceClassifier::scores: an empty sequence");
    for (const int64_t id : ids) {
      TORCH_CHECK(id >= 0 && id < config().vocab_size, "SequenceClassifier::scores: token id ", id,
                  " is outside the model's vocabulary [0, ", config().vocab_size, ")");
    }
    longest = std::max(longest, ids.size());
  }
  const auto b = static_cast<int64_t>(sequences.size());
  // Right padding with any valid id: causal attention keeps it from the real tokens.
  at::Tensor input_ids = at::full({b, static_cast<int64_t>(longest)}, std::max<int64_t>(pad_token_id_, 0), at::kLong);
  std::vector<int64_t> positions;
  for (int64_t i = 0; i < b; ++i) {
    const std::vector<int64_t>& ids = sequences[static_cast<size_t>(i)];
    input_ids[i].narrow(0, 0, static_cast<int64_t>(ids.size())).copy_(at::tensor(ids, at::kLong));
    positions.push_back(i * static_cast<int64_t>(longest) + scored_position(ids));
  }
  at::NoGradGuard no_grad;
  const at::Tensor hidden = decoder_->hidden_states(input_ids.to(decoder_->device()), {}, {});  // [B, T, H]
  const at::Tensor rows = at::tensor(positions, at::kLong).to(hidden.device());
  const at::Tensor last = hidden.reshape({-1, hidden.size(2)}).index_select(0, rows);  // [B, H]
  return linear(last, score_weight_, {}, decoder_->compute_dtype()).squeeze(1).to(at::kCPU);
}

}  // namespace ptrain::model
