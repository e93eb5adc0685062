#include "dpo_reference_cache.h"

#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace ptrain::dpo {
namespace {

constexpr const char* kFormat = "ptrain-dpo-reference-logps/1";
constexpr int64_t kProbeLength = 24;

struct Fnv1a {
  uint64_t state = 1469598103934665603ULL;
  void add(int64_t value) {
    for (int byte = 0; byte < 8; ++byte) {
      state ^= static_cast<uint64_t>(value >> (8 * byte)) & 0xffU;
      state *= 1099511628211ULL;
    }
  }
  template <class T>
  void add(const std::vector<T>& values) {
    add(static_cast<int64_t>(values.size()));
    for (const T value : values) add(static_cast<int64_t>(value));
  }
};

std::string hex(uint64_t value) {
  char buffer[17];
  std::snprintf(buffer, sizeof(buffer), "%016llx", static_cast<unsigned long long>(value));
  return buffer;
}

std::vector<double> probe_log_probs(sdk::LanguageModel& model) {
  const at::NoGradGuard no_grad;
  // A fixed pseudo-random byte sequence; any model sees it the same way.
  const int64_t span = std::min<int64_t>(model.vocab_size(), 256);
  std::vector<int64_t> tokens;
  for (int64_t k = 0; k <= kProbeLength; ++k) tokens.push_back((37 * k * k + 11 * k + 5) % span);
  sdk::TokenBatch batch;
  batch.input_ids = at::tensor(std::vector<int64_t>(tokens.begin(), tokens.end() - 1), at::kLong).view({1, -1});
  batch.target_ids = at::tensor(std::vector<int64_t>(tokens.begin() + 1, tokens.end()), at::kLong).view({1, -1});
  batch.loss_mask = at::ones({1, kProbeLength}, at::kBool);
  // Read on the host: the model computes on its device.
  const at::Tensor log_probs = model.target_log_probs(batch).log_probs.to(at::kCPU, at::kDouble).contiguous();
  return {log_probs.data_ptr<double>(), log_probs.data_ptr<double>() + log_probs.numel()};
}

}  // namespace

uint64_t data_fingerprint(const std::vector<TokenizedPair>& pairs) {
  Fnv1a hash;
  hash.add(static_cast<int64_t>(pairs.size()));
  for (const TokenizedPair& pair : pairs) {
    hash.add(pair.prompt);
    hash.add(pair.chosen);
    hash.add(pair.rejected);
    // Masks exist only for chat pairs; string pairs hash as before they existed,
    // so earlier caches stay valid.
    if (!pair.chosen_trained.empty() || !pair.rejected_trained.empty()) {
      hash.add(pair.chosen_trained);
      hash.add(pair.rejected_trained);
    }
  }
  return hash.state;
}

ReferenceFingerprint fingerprint_of(sdk::LanguageModel& model, const std::vector<TokenizedPair>& pairs) {
  ReferenceFingerprint fingerprint;
  fingerprint.data = data_fingerprint(pairs);
  fingerprint.num_pairs = static_cast<int64_t>(pairs.size());
  fingerprint.vocab_size = model.vocab_size();
  fingerprint.num_parameters = model.num_parameters();
  fingerprint.probe = probe_log_probs(model);
  return fingerprint;
}

void write_reference_cache(const std::string& path, const ReferenceCache& cache) {
  const ReferenceFingerprint& fingerprint = cache.fingerprint;
  TORCH_CHECK(cache.values.dim() == 2 && cache.values.size(0) == fingerprint.num_pairs &&
                  cache.values.size(1) == kReferenceColumns,
              "reference cache values must be [", fingerprint.num_pairs, ", ", kReferenceColumns, "], got ",
              cache.values.sizes());
  const at::Tensor values = cache.values.to(at::kCPU, at::kDouble).contiguous();
  nlohmann::json rows = nlohmann::json::array();
  const double* data = values.data_ptr<double>();
  for (int64_t i = 0; i < fingerprint.num_pairs; ++i) {
    rows.push_back(std::vector<double>(data + i * kReferenceColumns, data + (i + 1) * kReferenceColumns));
  }
  const nlohmann::json document{{"format", kFormat},
                                {"data_fingerprint", hex(fingerprint.data)},
                                {"num_pairs", fingerprint.num_pairs},
                                {"model",
                                 {{"vocab_size", fingerprint.vocab_size},
                                  {"num_parameters", fingerprint.num_parameters},
                                  {"probe_log_probs", fingerprint.probe}}},
                                {"columns", {"chosen_shared", "chosen_rest", "rejected_shared", "rejected_rest"}},
                                {"values", rows}};
  const std::filesystem::path target(path);
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path());
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary);
    out << document.dump() << '\n';
    if (!out) throw sdk::Error(temporary + ": cannot write the reference log-prob cache");
  }
  std::filesystem::rename(temporary, target);
}

std::optional<ReferenceCache> read_reference_cache(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return std::nullopt;
  std::ifstream in(path);
  ReferenceCache cache;
  try {
    const nlohmann::json document = nlohmann::json::parse(in);
    if (document.at("format") != kFormat) {
      throw sdk::Error(path + ": not a ptrain DPO reference cache (format '" + document.at("format").dump() + "')");
    }
    ReferenceFingerprint& fingerprint = cache.fingerprint;
    fingerprint.data = std::stoull(document.at("data_fingerprint").get<std::string>(), nullptr, 16);
    fingerprint.num_pairs = document.at("num_pairs").get<int64_t>();
    fingerprint.vocab_size = document.at("model").at("vocab_size").get<int64_t>();
    fingerprint.num_parameters = document.at("model").at("num_parameters").get<int64_t>();
    fingerprint.probe = document.at("model").at("probe_log_probs").get<std::vector<double>>();
    const nlohmann::json& rows = document.at("values");
    if (!rows.is_array() || static_cast<int64_t>(rows.size()) != fingerprint.num_pairs) {
      throw sdk::Error(path + ": 'values' must hold num_pairs = " + std::to_string(fingerprint.num_pairs) + " rows");
    }
    cache.values = at::empty({fingerprint.num_pairs, kReferenceColumns}, at::kDouble);
    auto values = cache.values.accessor<double, 2>();
    for (int64_t i = 0; i < fingerprint.num_pairs; ++i) {
      const std::vector<double> row = rows[i].get<std::vector<double>>();
      if (static_cast<int64_t>(row.size()) != kReferenceColumns) {
        throw sdk::Error(path + ": values row " + std::to_string(i) + " has " + std::to_string(row.size()) +
                         " columns, expected " + std::to_string(kReferenceColumns));
      }
      for (int64_t j = 0; j < kReferenceColumns; ++j) values[i][j] = row[j];
    }
  } catch (const nlohmann::json::exception& exception) {
    throw sdk::Error(path + ": not a ptrain DPO reference cache (" + exception.what() + ")");
  }
  return cache;
}

std::string reference_cache_mismatch(const ReferenceFingerprint& cached, const ReferenceFingerprint& expected) {
  std::ostringstream why;
  if (cached.data != expected.data || cached.num_pairs != expected.num_pairs) {
    why << "it was computed for another dataset or truncation (" << cached.num_pairs << " pairs, fingerprint "
        << hex(cached.data) << "; this run: " << expected.num_pairs << " pairs, fingerprint " << hex(expected.data)
        << ")";
    return why.str();
  }
  if (cached.vocab_size != expected.vocab_size || cached.num_parameters != expected.num_parameters) {
    why << "it was computed for another reference model (vocab_size " << cached.vocab_size << ", "
        << cached.num_parameters << " parameters; this run: vocab_size " << expected.vocab_size << ", "
        << expected.num_parameters << " parameters)";
    return why.str();
  }
  if (cached.probe.size() != expected.probe.size()) {
    why << "it was computed for another reference model (probe of " << cached.probe.size() << " values, expected "
        << expected.probe.size() << ")";
    return why.str();
  }
  for (size_t k = 0; k < cached.probe.size(); ++k) {
    // Loose enough for rounding across thread counts, far below what another model changes.
    if (std::abs(cached.probe[k] - expected.probe[k]) > 1e-4 * (1.0 + std::abs(expected.probe[k]))) {
      why << "it was computed for another reference model (probe log-prob " << k << ": cached " << cached.probe[k]
          << ", this model " << expected.probe[k] << ")";
      return why.str();
    }
  }
  return "";
}

}  // namespace ptrain::dpo
