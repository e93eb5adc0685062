// Sizes written as transformers' max_shard_size takes them: an integer and a
// unit, "5GB" (10^9 bytes), "500MB", "2GiB" (2^30), "64KiB", "100B".
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ptrain::config {

// Bytes, or nullopt for anything else: no digits, a fraction, an unknown unit
// (units are B, KB, MB, GB, TB, KiB, MiB, GiB, TiB, in any letter case, with
// or without a space), zero, or more than int64 holds.
std::optional<int64_t> parse_byte_size(const std::string& text);

}  // namespace ptrain::config
