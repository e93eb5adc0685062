// The key functions of the error classes: their vtables and type_info are
// emitted here, in libptrain_sdk, and nowhere else (errors.h says why).
#include "ptrain/sdk/errors.h"

namespace ptrain::sdk {

Error::~Error() = default;
UsageError::~UsageError() = default;
ConfigError::~ConfigError() = default;
DataError::~DataError() = default;
ModelError::~ModelError() = default;
PluginError::~PluginError() = default;

}  // namespace ptrain::sdk
