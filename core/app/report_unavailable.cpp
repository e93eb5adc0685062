// Built in place of report_command.cpp when ptrain is configured with
// -DPTRAIN_REPORT=OFF (no report page, so no charting library to embed).
#include "core/app/report_command.h"

#include "ptrain/sdk/errors.h"

namespace ptrain::app {

int command_report(const std::vector<std::filesystem::path>&, const std::filesystem::path&, std::ostream&) {
  throw sdk::Error("this ptrain was built without the HTML report (-DPTRAIN_REPORT=OFF)");
}

}  // namespace ptrain::app
