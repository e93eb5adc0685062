// The names of the figures the core writes to metrics.jsonl for every update
// step (docs/architecture.md#metrics), in one place: step_recorder.cpp writes
// them, and update_step.cpp refuses a plugin metric that takes one.
#pragma once

#include <array>

namespace ptrain::train::step_metric {

inline constexpr const char* kStep = "step";  // the step number every line starts with (metrics_sink.cpp)
inline constexpr const char* kLoss = "loss";
inline constexpr const char* kGradNorm = "grad_norm";
inline constexpr const char* kLr = "lr";
inline constexpr const char* kUnits = "units";
inline constexpr const char* kTokens = "tokens";
inline constexpr const char* kForwardTokens = "forward_tokens";  // only when a plugin ran forwards without gradients
inline constexpr const char* kPaddedTokens = "padded_tokens";
inline constexpr const char* kStepS = "step_s";
inline constexpr const char* kCommS = "comm_s";
inline constexpr const char* kTokensPerS = "tokens_per_s";
inline constexpr const char* kMfu = "mfu";
inline constexpr const char* kSkippedSteps = "skipped_steps";
inline constexpr const char* kNonfiniteSteps = "nonfinite_steps";
inline constexpr const char* kLossSpikes = "loss_spikes";
inline constexpr const char* kEpoch = "epoch";
inline constexpr const char* kEvalS = "eval_s";

// Every name above.
inline constexpr std::array<const char*, 17> kAll{
    kStep,  kLoss,       kGradNorm, kLr,           kUnits,          kTokens,     kForwardTokens, kPaddedTokens, kStepS,
    kCommS, kTokensPerS, kMfu,      kSkippedSteps, kNonfiniteSteps, kLossSpikes, kEpoch,         kEvalS};

}  // namespace ptrain::train::step_metric
