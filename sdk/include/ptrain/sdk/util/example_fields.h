// Reading a dataset example's JSON fields with errors that name its file:line.
#pragma once

#include "ptrain/sdk/batch.h"

#include <string>

namespace ptrain::sdk {

// Field access that fails with "file:line: field 'name': expected ..., got ...".
const std::string& require_string(const Example& example, const char* field);
bool has_field(const Example& example, const char* field);

}  // namespace ptrain::sdk
