#include "core/checkpoint/json_fields.h"

#include "ptrain/sdk/errors.h"

namespace ptrain::checkpoint {
namespace {

[[noreturn]] void fail_type(const nlohmann::json& value, const std::string& key, const JsonPlace& place,
                            const std::string& expected) {
  throw sdk::Error(place.path + ": key '" + place.key_name(key) + "': expected " + expected + ", got " +
                   value.type_name() + " " + value.dump());
}

}  // namespace

const nlohmann::json& json_field(const nlohmann::json& object, const std::string& key, const JsonPlace& place) {
  if (!object.is_object()) {
    throw sdk::Error(place.path + (place.parent.empty() ? "" : ": key '" + place.parent + "'") +
                     ": expected a JSON object, got " + object.type_name());
  }
  const auto it = object.find(key);
  if (it == object.end()) throw sdk::Error(place.path + ": key '" + place.key_name(key) + "' is missing");
  return *it;
}

std::string string_field(const nlohmann::json& object, const std::string& key, const JsonPlace& place) {
  const nlohmann::json& value = json_field(object, key, place);
  if (!value.is_string()) fail_type(value, key, place, "a string");
  return value.get<std::string>();
}

int64_t integer_field(const nlohmann::json& object, const std::string& key, const JsonPlace& place) {
  const nlohmann::json& value = json_field(object, key, place);
  if (!value.is_number_integer() || (value.is_number_unsigned() && value.get<uint64_t>() > INT64_MAX))
    fail_type(value, key, place, "an integer");
  return value.get<int64_t>();
}

uint64_t unsigned_field(const nlohmann::json& object, const std::string& key, const JsonPlace& place, uint64_t max) {
  const nlohmann::json& value = json_field(object, key, place);
  if (!value.is_number_unsigned() || value.get<uint64_t>() > max)
    fail_type(value, key, place, "an integer in [0, " + std::to_string(max) + "]");
  return value.get<uint64_t>();
}

}  // namespace ptrain::checkpoint
