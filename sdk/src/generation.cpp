#include "ptrain/sdk/generation.h"

namespace ptrain::sdk {
namespace {

// SplitMix64's finaliser (Steele, Lea & Flood 2014): nearby inputs give unrelated outputs.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t rollout_seed(uint64_t seed, int64_t step, int64_t prompt_index, int64_t generation_index) {
  uint64_t state = mix(seed);
  for (const int64_t value : {step, prompt_index, generation_index}) state = mix(state ^ static_cast<uint64_t>(value));
  return state;
}

}  // namespace ptrain::sdk
