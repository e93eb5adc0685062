// Tokenizes a whole dataset once, in parallel, and keeps the ids in the run
// directory so a restarted run does not tokenize again.
//
// Plugins tokenize in their own way (SFT: tokens and a loss mask; DPO: three
// sequences), so the cache stores what the plugin's function returns: a few
// integer arrays per example. A plugin calls tokenize_dataset() from
// TrainModule::prepare_dataset() and looks results up by Example::index in
// prepare() (tokenized_dataset.h does both, into the plugin's own type). The
// cache file is keyed by the tokenizer's fingerprint, the chat template, the
// plugin's `recipe` (its name, format version and every setting its function
// reads) and the content of every example, so any change to one of them
// tokenizes afresh; files are written to a temporary name and renamed, so a
// crash never leaves a torn cache.
#pragma once

#include "ptrain/sdk/batch.h"
#include "ptrain/sdk/context.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ptrain::sdk {

// One example's tokenization: e.g. {tokens, loss_mask}. Values must fit in int32.
using TokenArrays = std::vector<std::vector<int64_t>>;

struct TokenizeStats {
  bool from_cache = false;
  std::string cache_file;  // empty when the run has no output_dir
  int64_t examples = 0;
  int64_t json_bytes = 0;  // size of the examples as JSON, the text that was tokenized
  double seconds = 0.0;    // tokenizing (or loading) time
};

// Returns tokenize(examples[i]) for every i, computed with at::parallel_for on
// the intra-op threads, or read from <output_dir>/token_cache/. Exceptions
// from `tokenize` (e.g. DataError) propagate.
std::vector<TokenArrays> tokenize_dataset(Context& ctx, const std::vector<Example>& examples, const std::string& recipe,
                                          const std::function<TokenArrays(const Example&)>& tokenize,
                                          TokenizeStats* stats = nullptr);

// The same without a Context (tests, benchmarks): `cache_dir` empty turns the cache off.
std::vector<TokenArrays> tokenize_dataset(const Tokenizer& tokenizer, const std::string& cache_dir,
                                          const std::vector<Example>& examples, const std::string& recipe,
                                          const std::function<TokenArrays(const Example&)>& tokenize,
                                          TokenizeStats* stats = nullptr);

// What a tokenize_dataset() call did, for the log: "tokenized 4000 examples
// (0.02 s, 7.5 MB/s), cached in <file>" or "loaded 4000 examples (...) from
// <file>"; `noun` names what was counted ("pairs").
std::string describe_tokenizing(const TokenizeStats& stats, const std::string& noun);

}  // namespace ptrain::sdk
