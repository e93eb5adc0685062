// Small helpers the test files share.
#pragma once

#include "core/model/model_config.h"
#include "ptrain/sdk/model.h"

#include <ATen/core/Tensor.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

namespace ptrain::testing {

// A fresh directory under the system's temp directory, unique per process and
// instance (`prefix` names the test file), removed with everything in it.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Writes `text` to path()/name and returns the file's path.
  std::filesystem::path write(const std::string& name, const std::string& text) const;

 private:
  std::filesystem::path path_;
};

// True when `part` occurs in `text`: the usual check of an error message.
inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The message of the sdk::Error `action` throws, or "(no error)".
std::string error_of(const std::function<void()>& action);

// Every file, folder and symbolic link under `dir` (links not followed) by
// relative path: a file's bytes, "<dir>", or "-> target". Equal snapshots
// before and after an action: nothing under `dir` changed, byte for byte.
// Names in `ignored` (at any depth) are left out.
std::map<std::string, std::string> tree_snapshot(const std::filesystem::path& dir,
                                                 const std::vector<std::string>& ignored = {});

// Writes `text` (bytes as given) to dir/name and returns the path.
std::filesystem::path write_text_file(const std::filesystem::path& dir, const std::string& name,
                                      const std::string& text);

// Writes a safetensors file byte by byte: [u64 header_length][header][data].
void write_raw_safetensors(const std::filesystem::path& path, const std::string& header, const std::string& data,
                           uint64_t header_length);
inline void write_raw_safetensors(const std::filesystem::path& path, const std::string& header,
                                  const std::string& data) {
  write_raw_safetensors(path, header, data, header.size());
}

// The native (little-endian) bytes of `values`.
template <class T>
std::string bytes_of(std::initializer_list<T> values) {
  std::string out;
  for (T v : values) out.append(reinterpret_cast<const char*>(&v), sizeof(T));
  return out;
}

// True when two safetensors files hold the same names with bit-identical tensors.
bool same_safetensors(const std::filesystem::path& a, const std::filesystem::path& b);

// The lines of a metrics.jsonl file.
std::vector<nlohmann::json> read_metrics_jsonl(const std::filesystem::path& path);

// A 2-layer Qwen2-style model small enough for exact gradient checks:
// grouped-query attention (4 heads, 2 kv heads), q/k/v bias, untied lm_head,
// vocab 272 (the byte tokenizer's 259 ids and spare ones).
model::ModelConfig tiny_model_config();
// A Llama of the given sizes for the byte tokenizer (vocab 259, tied
// embeddings), as a run's [model] section with those sizes builds it.
model::ModelConfig byte_llama_config(int64_t hidden_size, int64_t intermediate_size, int64_t num_layers,
                                     int64_t num_heads, int64_t num_kv_heads, int64_t max_position_embeddings);

// A complete model directory as ptrain saves one (config.json,
// model.safetensors, the byte tokenizer's tokenizer.json and
// tokenizer_config.json) of a seeded 1-layer byte Llama with 32 positions:
// what `ptrain generate` and `ptrain eval` read.
void write_byte_model_dir(const std::filesystem::path& dir, uint64_t seed);

// The model's trainable tensors, in named_parameters() order.
std::vector<at::Tensor> parameters_of(const sdk::LanguageModel& model);

}  // namespace ptrain::testing
