#include "support/test_util.h"

#include "core/checkpoint/remove_tree.h"
#include "core/model/causal_lm.h"
#include "core/model/safetensors.h"
#include "core/tokenizer/byte_tokenizer_files.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>

namespace ptrain::testing {

TempDir::TempDir(const std::string& prefix) {
  static std::atomic<int> counter{0};
  path_ = std::filesystem::temp_directory_path() /
          (prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ignored;  // a test's leftovers in /tmp are no reason to fail it
  checkpoint::remove_tree(path_, ignored);
}

std::filesystem::path TempDir::write(const std::string& name, const std::string& text) const {
  return write_text_file(path_, name, text);
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const sdk::Error& error) {
    return error.what();
  }
  return "(no error)";
}

std::filesystem::path write_text_file(const std::filesystem::path& dir, const std::string& name,
                                      const std::string& text) {
  std::filesystem::create_directories(dir);
  const std::filesystem::path path = dir / name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::map<std::string, std::string> tree_snapshot(const std::filesystem::path& dir,
                                                 const std::vector<std::string>& ignored) {
  namespace fs = std::filesystem;
  std::map<std::string, std::string> tree;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    if (std::find(ignored.begin(), ignored.end(), name) != ignored.end()) {
      if (it->is_directory() && !it->is_symlink()) it.disable_recursion_pending();
      continue;
    }
    const std::string relative = fs::relative(it->path(), dir).string();
    if (it->is_symlink()) {
      tree[relative] = "-> " + fs::read_symlink(it->path()).string();
    } else if (it->is_directory()) {
      tree[relative] = "<dir>";
    } else {
      std::ifstream in(it->path(), std::ios::binary);
      tree[relative] = std::string(std::istreambuf_iterator<char>(in), {});
    }
  }
  return tree;
}

void write_raw_safetensors(const std::filesystem::path& path, const std::string& header, const std::string& data,
                           uint64_t header_length) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&header_length), 8);
  out << header << data;
}

bool same_safetensors(const std::filesystem::path& a, const std::filesystem::path& b) {
  const auto left = model::read_safetensors(a);
  const auto right = model::read_safetensors(b);
  if (left.size() != right.size()) return false;
  for (size_t i = 0; i < left.size(); ++i) {
    if (left[i].first != right[i].first || !at::equal(left[i].second, right[i].second)) return false;
  }
  return true;
}

std::vector<nlohmann::json> read_metrics_jsonl(const std::filesystem::path& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  }
  return lines;
}

std::vector<at::Tensor> parameters_of(const sdk::LanguageModel& model) {
  std::vector<at::Tensor> parameters;
  for (const auto& [name, parameter] : model.named_parameters()) parameters.push_back(parameter);
  return parameters;
}

model::ModelConfig byte_llama_config(int64_t hidden_size, int64_t intermediate_size, int64_t num_layers,
                                     int64_t num_heads, int64_t num_kv_heads, int64_t max_position_embeddings) {
  model::ModelConfig config;
  config.vocab_size = 259;
  config.hidden_size = hidden_size;
  config.intermediate_size = intermediate_size;
  config.num_layers = num_layers;
  config.num_heads = num_heads;
  config.num_kv_heads = num_kv_heads;
  config.max_position_embeddings = max_position_embeddings;
  config.tie_word_embeddings = true;
  return config;
}

void write_byte_model_dir(const std::filesystem::path& dir, uint64_t seed) {
  model::CausalLm::init_random(byte_llama_config(32, 64, 1, 2, 1, 32), seed)->save_hf_dir(dir);
  std::ofstream(dir / "tokenizer.json") << tokenizer::byte_tokenizer_json().dump(2);
  std::ofstream(dir / "tokenizer_config.json") << tokenizer::byte_tokenizer_config().dump(2);
}

model::ModelConfig tiny_model_config() {
  model::ModelConfig config;
  config.vocab_size = 272;
  config.hidden_size = 32;
  config.intermediate_size = 64;
  config.num_layers = 2;
  config.num_heads = 4;
  config.num_kv_heads = 2;
  config.max_position_embeddings = 64;
  config.rope_theta = 10000.0;
  config.rms_norm_eps = 1e-6;
  config.tie_word_embeddings = false;
  config.qkv_bias = true;
  config.o_bias = false;
  config.model_type = "qwen2";
  return config;
}

}  // namespace ptrain::testing
