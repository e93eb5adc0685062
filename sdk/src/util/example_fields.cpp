#include "ptrain/sdk/util/example_fields.h"

#include "ptrain/sdk/errors.h"

namespace ptrain::sdk {
namespace {

const char* json_type_name(const nlohmann::json& value) { return value.type_name(); }

}  // namespace

bool has_field(const Example& example, const char* field) {
  return example.fields.is_object() && example.fields.contains(field);
}

const std::string& require_string(const Example& example, const char* field) {
  if (!has_field(example, field)) {
    throw DataError(example.location + ": missing field '" + field + "'");
  }
  const nlohmann::json& value = example.fields.at(field);
  if (!value.is_string()) {
    throw DataError(example.location + ": field '" + field + "': expected a string, got " + json_type_name(value));
  }
  return value.get_ref<const std::string&>();
}

}  // namespace ptrain::sdk
