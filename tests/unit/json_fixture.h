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

}  // namespace ptrain::json_fixture
