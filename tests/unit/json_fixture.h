// Reading the JSON fixtures the unit tests compare against.
#pragma once

#include "catch.h"

#include "ptrain/sdk/chat.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <vector>

namespace ptrain::json_fixture {

// The JSON document at `path`; the test fails when the file cannot be opened.
inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

// [{"role": ..., "content": ...}, ...] as chat messages.
inline std::vector<sdk::ChatMessage> messages_of(const nlohmann::json& list) {
  std::vector<sdk::ChatMessage> messages;
  for (const nlohmann::json& m : list) messages.push_back({m.at("role"), m.at("content")});
  return messages;
}

// A tokenizer.json with a variant's JSON-pointer edits (variants.json in
// tests/fixtures/tokenizers), applied exactly as make_reference.mjs does.
inline nlohmann::json apply_variant(nlohmann::json tokenizer, const nlohmann::json& variant) {
  if (variant.contains("set")) {
    for (const auto& [pointer, value] : variant.at("set").items())
      tokenizer[nlohmann::json::json_pointer(pointer)] = value;
  }
  if (variant.contains("append")) {
    for (const auto& [pointer, items] : variant.at("append").items()) {
      for (const auto& item : items) tokenizer[nlohmann::json::json_pointer(pointer)].push_back(item);
    }
  }
  return tokenizer;
}

}  // namespace ptrain::json_fixture
