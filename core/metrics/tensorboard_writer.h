// TensorBoard event files: every step's metrics as scalars and the resolved
// config as a text summary, in TFRecord framing, readable by TensorBoard and
// by any other reader of TensorFlow's event format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

namespace ptrain::tensorboard {
class Event;
}

namespace ptrain::metrics {

// CRC-32C (Castagnoli) of `data`, masked as TFRecord stores it:
// ((crc >> 15) | (crc << 17)) + 0xa282ead8, so that a CRC of bytes that
// themselves hold CRCs is not trivially zero.
uint32_t masked_crc32c(const void* data, size_t size);

class TensorBoardWriter {
 public:
  // Creates dir/events.out.tfevents.<unix seconds>.<host>.<pid> and writes its
  // first record (file_version "brain.Event:2"). Throws sdk::Error naming the file.
  explicit TensorBoardWriter(const std::filesystem::path& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One event holding every value as a float scalar tagged with its metric
  // name (NaN and infinities are kept: TensorBoard shows them).
  void add_scalars(int64_t step, const std::map<std::string, double>& values);

  // A text summary (TensorBoard's text plugin renders it as Markdown).
  void add_text(int64_t step, const std::string& tag, const std::string& markdown);

  const std::filesystem::path& path() const { return path_; }

 private:
  // Frames one record: length, masked CRC of the length, data, masked CRC of
  // the data (little-endian), and flushes so a live TensorBoard sees the step.
  void write_event(const tensorboard::Event& event);

  std::filesystem::path path_;
  std::ofstream out_;
};

// TensorBoard event files need protobuf, an optional part of the build
// (CMake option PTRAIN_TENSORBOARD). Without it this throws sdk::ConfigError
// naming logging.tensorboard and the option; with it, it does nothing.
void require_tensorboard_available();

}  // namespace ptrain::metrics
