// The prepare_dataset() recipe of a plugin that tokenizes its whole dataset
// up front (the bundled sft, dpo and kto plugins): every example tokenized
// once into the plugin's own type, in parallel and through the token cache
// (token_cache.h), one log line saying so, and the results kept by
// Example::index for prepare(), which tokenizes on the spot only an example
// prepare_dataset() did not see (a held-out one: index -1).
#pragma once

#include "ptrain/sdk/context.h"
#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/token_cache.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::sdk {

// How a plugin's tokenized example is stored in the token cache and read
// back: from_arrays(to_arrays(x)) equals x.
template <typename Tokenized>
struct TokenCodec {
  TokenArrays (*to_arrays)(Tokenized tokenized);
  Tokenized (*from_arrays)(const TokenArrays& arrays);
};

// tokenize_dataset() into the plugin's own type, in the order of `examples`,
// with describe_tokenizing()'s line logged at info under `component`.
template <typename Tokenized>
std::vector<Tokenized> tokenize_examples(Context& ctx, const std::vector<Example>& examples, const std::string& recipe,
                                         const std::function<Tokenized(const Example&)>& tokenize,
                                         const TokenCodec<Tokenized>& codec, const std::string& component,
                                         const std::string& noun = "examples") {
  TokenizeStats stats;
  const std::vector<TokenArrays> arrays = tokenize_dataset(
      ctx, examples, recipe, [&](const Example& example) { return codec.to_arrays(tokenize(example)); }, &stats);
  std::vector<Tokenized> tokenized;
  tokenized.reserve(arrays.size());
  for (const TokenArrays& example_arrays : arrays) tokenized.push_back(codec.from_arrays(example_arrays));
  ctx.logger().info(component, describe_tokenizing(stats, noun));
  return tokenized;
}

// What prepare_dataset() tokenized, by Example::index.
template <typename Tokenized>
class TokenizedDataset {
 public:
  // Keeps tokenized[i] as examples[i]'s. prepare_dataset()'s examples carry
  // the indices 0 .. size-1 (TrainModule::prepare_dataset()).
  void assign(const std::vector<Example>& examples, std::vector<Tokenized> tokenized) {
    if (tokenized.size() != examples.size()) {
      throw PluginError("TokenizedDataset::assign: " + std::to_string(tokenized.size()) + " tokenized examples for " +
                        std::to_string(examples.size()) + " examples");
    }
    by_index_.assign(examples.size(), Tokenized{});
    for (size_t i = 0; i < examples.size(); ++i) {
      by_index_.at(static_cast<size_t>(examples[i].index)) = std::move(tokenized[i]);
    }
  }

  // The example as assign() got it, or nullptr for one it did not see.
  const Tokenized* find(const Example& example) const {
    const bool kept = example.index >= 0 && static_cast<size_t>(example.index) < by_index_.size();
    return kept ? &by_index_[static_cast<size_t>(example.index)] : nullptr;
  }

  const std::vector<Tokenized>& by_index() const { return by_index_; }

 private:
  std::vector<Tokenized> by_index_;
};

}  // namespace ptrain::sdk
