#include "ptrain/sdk/generation.h"

#include <random>

namespace ptrain::sdk {

// std::seed_seq's mixing is fixed by the C++ standard, so the seed is the same
// on every platform and library.
uint64_t rollout_seed(uint64_t seed, int64_t step, int64_t prompt_index, int64_t generation_index) {
  const auto low = [](uint64_t value) { return static_cast<uint32_t>(value & 0xffffffffULL); };
  const auto high = [](uint64_t value) { return static_cast<uint32_t>(value >> 32); };
  const auto u = [](int64_t value) { return static_cast<uint64_t>(value); };
  std::seed_seq sequence{low(seed),
                         high(seed),
                         low(u(step)),
                         high(u(step)),
                         low(u(prompt_index)),
                         high(u(prompt_index)),
                         low(u(generation_index)),
                         high(u(generation_index))};
  uint32_t words[2];
  sequence.generate(words, words + 2);
  return (static_cast<uint64_t>(words[0]) << 32) | words[1];
}

}  // namespace ptrain::sdk
