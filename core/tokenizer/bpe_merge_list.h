// tokenizer.json's "model.merges": one entry per merge, rank = position.
// Shared by both BPE models (byte-level and SentencePiece-style).
#pragma once

#include "core/tokenizer/json_source.h"

#include <nlohmann/json.hpp>

#include <string>
#include <utility>

namespace ptrain::tokenizer::detail {

// The two tokens of merges[rank]: older files write "a b", newer ones ["a", "b"].
std::pair<std::string, std::string> parse_merge(const nlohmann::json& merge, size_t rank, const JsonSource& file);

}  // namespace ptrain::tokenizer::detail
