// Built in place of tensorboard_writer.cpp when ptrain is configured with
// -DPTRAIN_TENSORBOARD=OFF (no protobuf): asking for event files is then a
// config error, and no writer can be made, so its members below never run.
#include "core/metrics/tensorboard_writer.h"

#include "ptrain/sdk/errors.h"

namespace ptrain::metrics {

void require_tensorboard_available() {
  throw sdk::ConfigError(
      "logging.tensorboard = true, but this ptrain was built without TensorBoard event files "
      "(-DPTRAIN_TENSORBOARD=OFF): set logging.tensorboard = false, or rebuild with -DPTRAIN_TENSORBOARD=ON");
}

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path&) { require_tensorboard_available(); }
TensorBoardWriter::~TensorBoardWriter() = default;
void TensorBoardWriter::add_scalars(int64_t, const std::map<std::string, double>&) {}
void TensorBoardWriter::add_text(int64_t, const std::string&, const std::string&) {}

}  // namespace ptrain::metrics
