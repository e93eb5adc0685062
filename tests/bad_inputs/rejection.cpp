#include "catch.h"

#include "bad_inputs/rejection.h"

#include "ptrain/sdk/errors.h"

namespace ptrain::testing {

Rejection rejection_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const sdk::UsageError& error) {
    return {"UsageError", error.what()};
  } catch (const sdk::ConfigError& error) {
    return {"ConfigError", error.what()};
  } catch (const sdk::DataError& error) {
    return {"DataError", error.what()};
  } catch (const sdk::ModelError& error) {
    return {"ModelError", error.what()};
  } catch (const sdk::PluginError& error) {
    return {"PluginError", error.what()};
  } catch (const sdk::Error& error) {
    return {"Error", error.what()};
  } catch (const std::exception& error) {
    return {"unexpected std::exception", error.what()};
  }
  return {"accepted", ""};
}

void check_rejected(const std::function<void()>& action, const std::string& kind, const std::string& location) {
  const Rejection rejection = rejection_of(action);
  INFO("message: " << rejection.message);
  CHECK(rejection.kind == kind);
  CHECK_THAT(rejection.message, Catch::Contains(location));
}

}  // namespace ptrain::testing
