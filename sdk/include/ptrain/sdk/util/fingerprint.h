// Content fingerprints for cache keys (tokenizers, token caches): FNV-1a,
// 64 bit. A cache key, not a defence against crafted collisions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ptrain::sdk {

inline constexpr uint64_t kFnv1aOffset = 1469598103934665603ULL;

// Continues `hash` over `bytes`, so fingerprints of several parts chain.
uint64_t fnv1a(std::string_view bytes, uint64_t hash = kFnv1aOffset);

// 16 lower-case hex digits.
std::string hex64(uint64_t value);

}  // namespace ptrain::sdk
