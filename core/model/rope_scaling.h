// Rotary-embedding frequency scaling, as config.json's `rope_scaling` (or
// transformers 5's `rope_parameters`) describes it, and the inverse
// frequencies it gives (transformers' modeling_rope_utils).
#pragma once

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace ptrain::model {

// How rotary frequencies are rescaled for contexts longer than the model was
// pre-trained on:
//   linear: inv_freq / factor, i.e. positions divided by factor
//           (_compute_linear_scaling_rope_parameters);
//   llama3: Llama 3.1's band-wise rule (_compute_llama3_parameters): wave
//           lengths above original_max_position_embeddings / low_freq_factor
//           are stretched by factor, those below .../ high_freq_factor are
//           kept, and the band between is interpolated smoothly.
enum class RopeScalingType { kNone, kLinear, kLlama3 };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;                     // llama3 only
  double high_freq_factor = 4.0;                    // llama3 only
  int64_t original_max_position_embeddings = 8192;  // llama3 only

  // Reads the object at config.json's key `key` ("rope_scaling" or
  // "rope_parameters"); the type comes from "rope_type" (or the older
  // "type"), "default" meaning no scaling. Every key the type needs is
  // required, and keys that would change the computation in ways not
  // implemented (another type, attention_factor, ...) are refused: errors
  // name `source`, the key and what is supported. `ignored_keys` are read
  // elsewhere (rope_parameters' rope_theta).
  static RopeScaling from_hf_json(const nlohmann::json& j, const std::string& source, const std::string& key,
                                  const std::vector<std::string>& ignored_keys = {});
  // config.json's rope_scaling: null without scaling.
  nlohmann::json to_hf_json() const;
  // Throws sdk::ModelError naming the first inconsistent field.
  void validate() const;

  bool operator==(const RopeScaling& other) const;
  bool operator!=(const RopeScaling& other) const { return !(*this == other); }
};

// 1 / theta^(2i/d) for i < d/2, then rescaled as `scaling` says: [d/2]
// float32, computed in float32 in transformers' order of operations.
at::Tensor rope_inv_freq(double theta, int64_t head_dim, const RopeScaling& scaling);

}  // namespace ptrain::model
