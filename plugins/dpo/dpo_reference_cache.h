// The precomputed reference log-probs of a dataset, cached in a JSON file
// with fingerprints of the data and of the reference model, so that a cache
// is reused only for the model and data it was computed from.
//
// The model fingerprint is functional: the SDK exposes no weights, so the
// cache stores the model's log-probs on a fixed probe sequence (plus its
// vocabulary and parameter counts) and compares them with a tolerance that
// absorbs thread-count rounding but not a different model.
#pragma once

#include "dpo_data.h"

#include "ptrain/sdk/model.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ptrain::dpo {

// Columns of ReferenceCache::values.
enum ReferenceColumn : int64_t { kChosenShared = 0, kChosenRest = 1, kRejectedShared = 2, kRejectedRest = 3 };
inline constexpr int64_t kReferenceColumns = 4;

struct ReferenceFingerprint {
  uint64_t data = 0;  // of the tokenized pairs, in dataset order (truncation settings included)
  int64_t num_pairs = 0;
  int64_t vocab_size = 0;
  int64_t num_parameters = 0;
  std::vector<double> probe;  // the model's log-probs on the probe sequence
};

struct ReferenceCache {
  ReferenceFingerprint fingerprint;
  at::Tensor values;  // [num_pairs, 4] float64: see ReferenceColumn
};

// FNV-1a over the token ids and section lengths of every pair.
uint64_t data_fingerprint(const std::vector<TokenizedPair>& pairs);

ReferenceFingerprint fingerprint_of(sdk::LanguageModel& model, const std::vector<TokenizedPair>& pairs);

// Written to a temporary file and renamed, so a crash leaves no half cache.
void write_reference_cache(const std::string& path, const ReferenceCache& cache);

// nullopt when no file exists; throws sdk::Error naming the file when it is unreadable.
std::optional<ReferenceCache> read_reference_cache(const std::string& path);

// Empty when `cached` was made for `expected`; otherwise why not, naming what differs.
std::string reference_cache_mismatch(const ReferenceFingerprint& cached, const ReferenceFingerprint& expected);

}  // namespace ptrain::dpo
