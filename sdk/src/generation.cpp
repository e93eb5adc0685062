#include "ptrain/sdk/generation.h"

#include <initializer_list>
#include <random>
#include <vector>

namespace ptrain::sdk {

// std::seed_seq's mixing is fixed by the C++ standard, so the seed is the same
// on every platform and library.
namespace {

// std::seed_seq over the low and high 32-bit words of each value, in order.
uint64_t seed_of(std::initializer_list<uint64_t> values) {
  std::vector<uint32_t> words;
  for (const uint64_t value : values) {
    words.push_back(static_cast<uint32_t>(value & 0xffffffffULL));
    words.push_back(static_cast<uint32_t>(value >> 32));
  }
  std::seed_seq sequence(words.begin(), words.end());
  uint32_t out[2];
  sequence.generate(out, out + 2);
  return (static_cast<uint64_t>(out[0]) << 32) | out[1];
}

uint64_t u(int64_t value) { return static_cast<uint64_t>(value); }

}  // namespace

uint64_t rollout_seed(uint64_t seed, int64_t step, int64_t prompt_index, int64_t generation_index) {
  return seed_of({seed, u(step), u(prompt_index), u(generation_index)});
}

uint64_t rollout_seed(uint64_t seed, int64_t step, int64_t prompt_index, int64_t generation_index, int64_t turn) {
  if (turn == 0) return rollout_seed(seed, step, prompt_index, generation_index);
  return seed_of({seed, u(step), u(prompt_index), u(generation_index), u(turn)});
}

}  // namespace ptrain::sdk
