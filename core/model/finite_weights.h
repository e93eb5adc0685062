// Weights read from files must be finite: a NaN or Inf in a model or adapter
// file makes every loss NaN from the first step, far from its cause.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace ptrain::model {

// Throws sdk::ModelError "SOURCE: tensor 'NAME' holds N NaN or Inf values of M"
// when the floating-point `tensor` is not finite everywhere.
void require_finite_weights(const at::Tensor& tensor, const std::string& name, const std::string& source);

}  // namespace ptrain::model
