// Typed reads of the JSON files a checkpoint holds (manifest.json,
// trainer_state.json), so that a hand-edited or damaged file fails naming
// the file and the key rather than with a bare JSON library type error.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace ptrain::checkpoint {

// Where a field is: the file, and the key of the object holding it ("" at
// the top), so errors say "PATH: key 'files.model.safetensors.bytes'".
struct JsonPlace {
  std::string path;
  std::string parent;
  std::string key_name(const std::string& key) const { return parent.empty() ? key : parent + "." + key; }
};

// object[key], which must be present. Throws sdk::Error "PATH: key 'KEY' is
// missing", or names the parent when `object` is no JSON object.
const nlohmann::json& json_field(const nlohmann::json& object, const std::string& key, const JsonPlace& place);

// The field as a string, an integer, or an integer in [0, max]; throws
// sdk::Error "PATH: key 'KEY': expected ..., got TYPE VALUE".
std::string string_field(const nlohmann::json& object, const std::string& key, const JsonPlace& place);
int64_t integer_field(const nlohmann::json& object, const std::string& key, const JsonPlace& place);
uint64_t unsigned_field(const nlohmann::json& object, const std::string& key, const JsonPlace& place,
                        uint64_t max = UINT64_MAX);

}  // namespace ptrain::checkpoint
