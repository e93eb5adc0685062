#include "core/model/rope_scaling.h"

#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <sstream>

namespace ptrain::model {
namespace {

using nlohmann::json;

constexpr double kPi = 3.14159265358979323846;

const char* type_name(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::kNone:
      return "default";
    case RopeScalingType::kLinear:
      return "linear";
    case RopeScalingType::kLlama3:
      return "llama3";
  }
  return "?";
}

// The keys each type reads; all of them are required.
std::vector<std::string> keys_of(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::kNone:
      return {};
    case RopeScalingType::kLinear:
      return {"factor"};
    case RopeScalingType::kLlama3:
      return {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"};
  }
  return {};
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out.empty() ? "none" : out;
}

// Errors name the file, the object's key and the field inside it.
class ScalingReader {
 public:
  ScalingReader(const json& j, const std::string& source, const std::string& key) : j_(j), source_(source), key_(key) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw sdk::ModelError(source_ + ": key '" + key_ + (field.empty() ? "" : "." + field) + "': " + what);
  }

  RopeScalingType type() const {
    // transformers reads "rope_type", falling back to the older "type".
    const char* field = j_.contains("rope_type") ? "rope_type" : j_.contains("type") ? "type" : nullptr;
    if (field == nullptr) fail("rope_type", "required but missing (supported: default, linear, llama3)");
    const json& v = j_.at(field);
    if (!v.is_string()) fail(field, "expected a string, got " + v.dump());
    const std::string name = v.get<std::string>();
    if (name == "default") return RopeScalingType::kNone;
    if (name == "linear") return RopeScalingType::kLinear;
    if (name == "llama3") return RopeScalingType::kLlama3;
    fail(field, "unsupported rope scaling type \"" + name + "\" (supported: default, linear, llama3)");
  }

  double number(const std::string& field) const {
    if (!j_.contains(field) || j_.at(field).is_null()) fail(field, "required but missing");
    const json& v = j_.at(field);
    if (!v.is_number()) fail(field, "expected a number, got " + v.dump());
    return v.get<double>();
  }

  int64_t integer(const std::string& field) const {
    if (!j_.contains(field) || j_.at(field).is_null()) fail(field, "required but missing");
    const json& v = j_.at(field);
    if (!v.is_number_integer()) fail(field, "expected an integer, got " + v.dump());
    return v.get<int64_t>();
  }

 private:
  const json& j_;
  const std::string& source_;
  const std::string& key_;
};

}  // namespace

RopeScaling RopeScaling::from_hf_json(const json& j, const std::string& source, const std::string& key,
                                      const std::vector<std::string>& ignored_keys) {
  const ScalingReader r(j, source, key);
  if (!j.is_object()) r.fail("", "expected an object or null, got " + j.dump());
  RopeScaling s;
  s.type = r.type();
  const std::vector<std::string> keys = keys_of(s.type);
  // A key this type does not read (yarn's attention_factor, longrope's
  // short_factor, ...) would change the model in transformers.
  for (const auto& item : j.items()) {
    const std::string& name = item.key();
    const auto known = [&](const std::vector<std::string>& list) {
      return std::find(list.begin(), list.end(), name) != list.end();
    };
    if (name == "rope_type" || name == "type" || known(keys) || known(ignored_keys)) continue;
    r.fail(name,
           std::string("not supported with rope type \"") + type_name(s.type) + "\" (its keys: " + join(keys) + ")");
  }
  if (s.type == RopeScalingType::kNone) return s;
  s.factor = r.number("factor");
  if (s.type == RopeScalingType::kLlama3) {
    s.low_freq_factor = r.number("low_freq_factor");
    s.high_freq_factor = r.number("high_freq_factor");
    s.original_max_position_embeddings = r.integer("original_max_position_embeddings");
  }
  try {
    s.validate();
  } catch (const sdk::ModelError& e) {
    throw sdk::ModelError(source + ": key '" + key + "': " + e.what());
  }
  return s;
}

json RopeScaling::to_hf_json() const {
  if (type == RopeScalingType::kNone) return nullptr;
  json j = {{"rope_type", type_name(type)}, {"factor", factor}};
  if (type == RopeScalingType::kLlama3) {
    j["low_freq_factor"] = low_freq_factor;
    j["high_freq_factor"] = high_freq_factor;
    j["original_max_position_embeddings"] = original_max_position_embeddings;
  }
  return j;
}

void RopeScaling::validate() const {
  if (type == RopeScalingType::kNone) return;
  auto fail = [](const std::string& what) { throw sdk::ModelError("rope scaling: " + what); };
  auto describe = [](double value) {
    std::ostringstream out;
    out << value;
    return out.str();
  };
  if (!(factor > 0.0) || !std::isfinite(factor)) fail("factor must be a finite number > 0, got " + describe(factor));
  if (type != RopeScalingType::kLlama3) return;
  if (!(low_freq_factor > 0.0) || !std::isfinite(low_freq_factor)) {
    fail("low_freq_factor must be a finite number > 0, got " + describe(low_freq_factor));
  }
  // The smooth band divides by high_freq_factor - low_freq_factor.
  if (!(high_freq_factor > low_freq_factor) || !std::isfinite(high_freq_factor)) {
    fail("high_freq_factor (" + describe(high_freq_factor) + ") must be finite and greater than low_freq_factor (" +
         describe(low_freq_factor) + ")");
  }
  if (original_max_position_embeddings <= 0) {
    fail("original_max_position_embeddings must be > 0, got " + std::to_string(original_max_position_embeddings));
  }
}

bool RopeScaling::operator==(const RopeScaling& o) const {
  if (type != o.type) return false;
  if (type == RopeScalingType::kNone) return true;
  if (factor != o.factor) return false;
  return type != RopeScalingType::kLlama3 ||
         (low_freq_factor == o.low_freq_factor && high_freq_factor == o.high_freq_factor &&
          original_max_position_embeddings == o.original_max_position_embeddings);
}

at::Tensor rope_inv_freq(double theta, int64_t head_dim, const RopeScaling& scaling) {
  const double d = static_cast<double>(head_dim);
  const at::Tensor exponents = at::arange(0, head_dim, 2, at::kLong).to(at::kFloat) / d;
  const at::Tensor inv_freq = at::pow(theta, exponents).reciprocal();  // [d/2]
  switch (scaling.type) {
    case RopeScalingType::kNone:
      return inv_freq;
    case RopeScalingType::kLinear:
      return inv_freq / scaling.factor;
    case RopeScalingType::kLlama3:
      break;
  }
  // _compute_llama3_parameters, op for op (Python's `scalar / tensor` is
  // tensor.reciprocal() * scalar).
  const double old_context = static_cast<double>(scaling.original_max_position_embeddings);
  const double low_freq_wavelen = old_context / scaling.low_freq_factor;
  const double high_freq_wavelen = old_context / scaling.high_freq_factor;
  const at::Tensor wavelen = inv_freq.reciprocal() * (2 * kPi);
  const at::Tensor stretched = at::where(wavelen > low_freq_wavelen, inv_freq / scaling.factor, inv_freq);
  const at::Tensor smooth_factor = (wavelen.reciprocal() * old_context - scaling.low_freq_factor) /
                                   (scaling.high_freq_factor - scaling.low_freq_factor);
  const at::Tensor smoothed = (1 - smooth_factor) * stretched / scaling.factor + smooth_factor * stretched;
  const at::Tensor medium = (wavelen < high_freq_wavelen).logical_not() & (wavelen > low_freq_wavelen).logical_not();
  return at::where(medium, smoothed, stretched);
}

}  // namespace ptrain::model
