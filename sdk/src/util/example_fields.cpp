#include "ptrain/sdk/util/example_fields.h"

#include "ptrain/sdk/errors.h"

namespace ptrain::sdk {
namespace {

// The field's value, or DataError naming the example when it is missing.
const nlohmann::json& required_field(const Example& example, const char* field) {
  if (!has_field(example, field)) throw DataError(example.location + ": missing field '" + field + "'");
  return example.fields.at(field);
}

[[noreturn]] void wrong_type(const Example& example, const char* field, const char* expected,
                             const nlohmann::json& value) {
  throw DataError(example.location + ": field '" + field + "': expected " + expected + ", got " + value.type_name() +
                  (value.is_primitive() ? " " + value.dump() : std::string()));
}

}  // namespace

bool has_field(const Example& example, const char* field) {
  return example.fields.is_object() && example.fields.contains(field);
}

const std::string& require_string(const Example& example, const char* field) {
  const nlohmann::json& value = required_field(example, field);
  if (!value.is_string()) {
    throw DataError(example.location + ": field '" + field + "': expected a string, got " + value.type_name());
  }
  return value.get_ref<const std::string&>();
}

bool require_bool(const Example& example, const char* field) {
  const nlohmann::json& value = required_field(example, field);
  if (!value.is_boolean()) wrong_type(example, field, "true or false", value);
  return value.get<bool>();
}

double require_number(const Example& example, const char* field) {
  const nlohmann::json& value = required_field(example, field);
  if (!value.is_number()) wrong_type(example, field, "a number", value);
  return value.get<double>();  // JSON numbers are finite
}

}  // namespace ptrain::sdk
