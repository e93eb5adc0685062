// AdamW as the optimizer runs it (core/train/adamw.h: one fused kernel per
// group on LibTorch >= 2.4, _foreach_ ops before) against the update written
// out in float64 from Loshchilov & Hutter's algorithm as torch.optim.AdamW
// states it: decoupled weight decay on matrices only, bias-corrected moments,
// a tensor without a gradient skipped (its own step count stays), and the
// state saved and loaded mid-run continuing exactly as the unbroken run.
#include "catch.h"

#include "core/train/optimizer.h"

#include <ATen/ATen.h>

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace {

using ptrain::config::OptimSection;
using ptrain::train::ParameterOptimizer;
using Named = std::vector<std::pair<std::string, at::Tensor>>;

OptimSection adamw() {
  OptimSection optim;
  optim.lr = 1e-2;
  optim.weight_decay = 0.1;
  optim.beta1 = 0.9;
  optim.beta2 = 0.95;
  optim.eps = 1e-6;
  return optim;
}

// The float64 reference of one tensor.
struct Reference {
  at::Tensor p, m, v;
  int64_t step = 0;

  void update(const at::Tensor& grad, double lr, double weight_decay, const OptimSection& o) {
    const at::Tensor g = grad.to(at::kDouble);
    ++step;
    p = p * (1.0 - lr * weight_decay);
    m = o.beta1 * m + (1.0 - o.beta1) * g;
    v = o.beta2 * v + (1.0 - o.beta2) * g * g;
    const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(step));
    const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(step));
    p = p - lr / bc1 * m / (v.sqrt() / std::sqrt(bc2) + o.eps);
  }
};

double max_relative_error(const at::Tensor& actual, const at::Tensor& expected) {
  return ((actual.to(at::kDouble) - expected).abs().max() / expected.abs().max()).item<double>();
}

Named fresh_parameters() {
  at::manual_seed(3);
  return {{"w", at::randn({7, 5})}, {"b", at::randn({5})}, {"u", at::randn({3, 4})}};
}

}  // namespace

TEST_CASE("AdamW: the update of the float64 algorithm, decay on matrices only, skipped tensors keep their step",
          "[optim][adamw]") {
  const OptimSection optim = adamw();
  const Named named = fresh_parameters();
  std::map<std::string, Reference> reference;
  for (const auto& [name, p] : named) {
    reference[name] = {p.to(at::kDouble), at::zeros_like(p, at::kDouble), at::zeros_like(p, at::kDouble)};
  }
  ParameterOptimizer optimizer(optim, named);
  CHECK(optimizer.num_decayed() == 2);      // w, u
  CHECK(optimizer.num_not_decayed() == 1);  // b

  const std::vector<double> lrs{1e-2, 5e-3, 2e-2, 1e-2};
  for (size_t step = 0; step < lrs.size(); ++step) {
    for (const auto& [name, p] : named) {
      // "u" has no gradient at the second step: neither updated nor counted.
      p.mutable_grad() = (name == "u" && step == 1) ? at::Tensor() : at::randn(p.sizes());
      if (p.grad().defined()) {
        reference[name].update(p.grad(), lrs[step], p.dim() >= 2 ? optim.weight_decay : 0.0, optim);
      }
    }
    optimizer.step(lrs[step]);
  }
  for (const auto& [name, p] : named) {
    INFO(name);
    CHECK(max_relative_error(p, reference[name].p) < 1e-6);
  }
  std::map<std::string, at::Tensor> state;
  for (const auto& [name, tensor] : optimizer.state_tensors()) state[name] = tensor;
  CHECK(state.at("w.step").item<int64_t>() == 4);
  CHECK(state.at("u.step").item<int64_t>() == 3);
  CHECK(state.at("w.step").scalar_type() == at::kLong);
  CHECK(max_relative_error(state.at("u.exp_avg"), reference["u"].m) < 1e-6);
  CHECK(max_relative_error(state.at("b.exp_avg_sq"), reference["b"].v) < 1e-6);
}

TEST_CASE("AdamW: state saved and loaded mid-run continues as the unbroken run", "[optim][adamw]") {
  const OptimSection optim = adamw();
  const Named unbroken = fresh_parameters();
  const Named resumed = fresh_parameters();
  ParameterOptimizer first(optim, unbroken);
  ParameterOptimizer before(optim, resumed);
  at::manual_seed(5);
  std::vector<std::vector<at::Tensor>> grads(3);
  for (auto& step : grads) {
    for (const auto& [name, p] : unbroken) step.push_back(at::randn(p.sizes()));
  }
  const auto apply = [&](const Named& named, ParameterOptimizer& optimizer, size_t step) {
    for (size_t i = 0; i < named.size(); ++i) named[i].second.mutable_grad() = grads[step][i].clone();
    optimizer.step(1e-2);
  };
  for (size_t step = 0; step < 3; ++step) apply(unbroken, first, step);
  for (size_t step = 0; step < 2; ++step) apply(resumed, before, step);
  // A new optimizer over the same tensors, from the saved state (as a resume does).
  ParameterOptimizer after(optim, resumed);
  after.load_state_tensors(before.state_tensors());
  apply(resumed, after, 2);
  for (size_t i = 0; i < unbroken.size(); ++i) {
    INFO(unbroken[i].first);
    CHECK(at::equal(resumed[i].second, unbroken[i].second));
  }
  // Loading copies: stepping on does not write into the tensors it was given.
  const auto saved = after.state_tensors();
  const at::Tensor copy = saved.front().second.clone();
  ParameterOptimizer again(optim, resumed);
  again.load_state_tensors(saved);
  apply(resumed, again, 0);
  CHECK(at::equal(saved.front().second, copy));
}
