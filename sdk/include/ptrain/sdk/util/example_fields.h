// Reading a dataset example's JSON fields with errors that name its file:line.
#pragma once

#include "ptrain/sdk/batch.h"

#include <string>

namespace ptrain::sdk {

// Field access that fails with DataError "file:line: missing field 'name'" or
// "file:line: field 'name': expected a <type>, got <JSON type>".
const std::string& require_string(const Example& example, const char* field);
bool require_bool(const Example& example, const char* field);      // true / false, not 0 / 1
double require_number(const Example& example, const char* field);  // an integer or a float
bool has_field(const Example& example, const char* field);

}  // namespace ptrain::sdk
