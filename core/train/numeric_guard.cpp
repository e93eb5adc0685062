#include "core/train/numeric_guard.h"

#include "core/checkpoint/json_fields.h"
#include "core/log/logger.h"
#include "ptrain/sdk/errors.h"

#include <algorithm>
#include <cmath>

namespace ptrain::train {

bool local_fault(double local_loss, double grad_norm) {
  return !(std::isfinite(local_loss) && std::isfinite(grad_norm));
}

NumericGuard::NumericGuard(int64_t max_consecutive_skips, double loss_spike_factor)
    : max_consecutive_skips_(max_consecutive_skips), loss_spike_factor_(loss_spike_factor) {}

NumericGuard::Verdict NumericGuard::on_step(int64_t step, bool fault, double loss) {
  Verdict verdict;
  if (fault) {
    verdict.skip = true;
    ++faults_;
    if (++consecutive_ >= max_consecutive_skips_) {
      throw sdk::Error("step " + std::to_string(step) + ": " + std::to_string(consecutive_) +
                       " consecutive updates had a non-finite loss or gradient norm (train.max_consecutive_skips = " +
                       std::to_string(max_consecutive_skips_) +
                       "); stopping without a checkpoint of this state. Lower optim.lr, check the data, or "
                       "resume from the last checkpoint");
    }
    return verdict;
  }
  consecutive_ = 0;
  if (seen_loss_ && loss_spike_factor_ > 0.0 && running_max_loss_ > 0.0 &&
      loss >= loss_spike_factor_ * running_max_loss_) {
    verdict.spike = true;
    ++spikes_;
    return verdict;  // a spike does not raise the bar for the next one
  }
  running_max_loss_ = seen_loss_ ? std::max(running_max_loss_, loss) : loss;
  seen_loss_ = true;
  return verdict;
}

bool NumericGuard::apply_update(int64_t step, bool has_units, bool fault, double loss) {
  const std::string at_step = "step " + std::to_string(step) + ": ";
  if (!has_units) {
    log::warn("train", at_step + "no loss unit in the global batch (nothing to learn from); step skipped");
    return false;
  }
  const Verdict verdict = on_step(step, fault, loss);
  if (verdict.skip) {
    log::warn("train", at_step + "non-finite loss or gradient norm on some rank; update skipped on every rank");
  }
  if (verdict.spike) {
    log::warn("train", at_step + "loss spike: " + std::to_string(loss) +
                           " is at least train.loss_spike_factor times every earlier loss");
  }
  return !verdict.skip;
}

nlohmann::json NumericGuard::state() const {
  return {{"consecutive_faults", consecutive_},
          {"nonfinite_steps", faults_},
          {"loss_spikes", spikes_},
          {"running_max_loss", running_max_loss_},
          {"seen_loss", seen_loss_}};
}

void NumericGuard::restore(const nlohmann::json& state, const std::string& source) {
  if (state.is_null()) {
    log::info("resume", source + " holds no numeric guard counters (a checkpoint of an older ptrain): "
                        "nonfinite_steps, loss_spikes and the loss-spike bar start afresh");
    return;
  }
  const Record record = read_record(state, source);
  consecutive_ = record.consecutive_faults;
  faults_ = record.nonfinite_steps;
  spikes_ = record.loss_spikes;
  running_max_loss_ = record.running_max_loss;
  seen_loss_ = record.seen_loss;
}

void NumericGuard::check_record(const nlohmann::json& state, const std::string& source) {
  if (!state.is_null()) read_record(state, source);
}

NumericGuard::Record NumericGuard::read_record(const nlohmann::json& state, const std::string& source) {
  const checkpoint::JsonPlace place{source, "numeric_guard"};
  Record record;
  record.consecutive_faults = checkpoint::integer_field(state, "consecutive_faults", place);
  record.nonfinite_steps = checkpoint::integer_field(state, "nonfinite_steps", place);
  record.loss_spikes = checkpoint::integer_field(state, "loss_spikes", place);
  const nlohmann::json& running_max = checkpoint::json_field(state, "running_max_loss", place);
  const nlohmann::json& seen = checkpoint::json_field(state, "seen_loss", place);
  const auto wrong_type = [&](const std::string& key, const std::string& expected, const nlohmann::json& got) {
    return sdk::Error(source + ": key '" + place.key_name(key) + "': expected " + expected + ", got " + got.dump());
  };
  if (!running_max.is_number()) throw wrong_type("running_max_loss", "a number", running_max);
  if (!seen.is_boolean()) throw wrong_type("seen_loss", "true or false", seen);
  record.running_max_loss = running_max.get<double>();
  record.seen_loss = seen.get<bool>();
  return record;
}

}  // namespace ptrain::train
