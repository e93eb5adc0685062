// Small helpers the test files share.
#pragma once

#include "core/model/model_config.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace ptrain::testing {

// The message of the sdk::Error `action` throws, or "(no error)".
std::string error_of(const std::function<void()>& action);

// Writes `text` (bytes as given) to dir/name and returns the path.
std::filesystem::path write_text_file(const std::filesystem::path& dir, const std::string& name,
                                      const std::string& text);

// The lines of a metrics.jsonl file.
std::vector<nlohmann::json> read_metrics_jsonl(const std::filesystem::path& path);

// A 2-layer Qwen2-style model small enough for exact gradient checks:
// grouped-query attention (4 heads, 2 kv heads), q/k/v bias, untied lm_head,
// vocab 272 (the byte tokenizer's 259 ids and spare ones).
model::ModelConfig tiny_model_config();

}  // namespace ptrain::testing
