#include "core/metrics/tensorboard_writer.h"

#include "core/metrics/proto/tensorboard_event.pb.h"
#include "ptrain/sdk/errors.h"

#include <unistd.h>
#include <boost/crc.hpp>

#include <array>
#include <chrono>

namespace ptrain::metrics {
namespace {

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) return "localhost";
  return name.data();
}

template <typename Int>
void append_little_endian(std::string& out, Int value) {
  for (size_t byte = 0; byte < sizeof(Int); ++byte) out.push_back(static_cast<char>((value >> (8 * byte)) & 0xff));
}

}  // namespace

void require_tensorboard_available() {}

uint32_t masked_crc32c(const void* data, size_t size) {
  // CRC-32C: polynomial 0x1EDC6F41, reflected, initial and final XOR all ones.
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(data, size);
  const uint32_t value = crc.checksum();
  return ((value >> 15) | (value << 17)) + 0xa282ead8u;
}

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& dir) {
  const double now = unix_seconds();
  path_ = dir / ("events.out.tfevents." + std::to_string(static_cast<int64_t>(now)) + "." + host_name() + "." +
                 std::to_string(::getpid()));
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_) throw sdk::Error(path_.string() + ": cannot open the TensorBoard event file for writing");
  tensorboard::Event version;
  version.set_wall_time(now);
  version.set_file_version("brain.Event:2");
  write_event(version);
}

TensorBoardWriter::~TensorBoardWriter() = default;

void TensorBoardWriter::add_scalars(int64_t step, const std::map<std::string, double>& values) {
  tensorboard::Event event;
  event.set_wall_time(unix_seconds());
  event.set_step(step);
  for (const auto& [name, value] : values) {
    tensorboard::Summary::Value* scalar = event.mutable_summary()->add_value();
    scalar->set_tag(name);
    scalar->set_simple_value(static_cast<float>(value));
  }
  write_event(event);
}

void TensorBoardWriter::add_text(int64_t step, const std::string& tag, const std::string& markdown) {
  tensorboard::Event event;
  event.set_wall_time(unix_seconds());
  event.set_step(step);
  tensorboard::Summary::Value* text = event.mutable_summary()->add_value();
  text->set_tag(tag);
  text->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  tensorboard::TensorProto* tensor = text->mutable_tensor();
  tensor->set_dtype(tensorboard::DT_STRING);
  tensor->mutable_tensor_shape();  // no dims: a scalar string
  tensor->add_string_val(markdown);
  write_event(event);
}

void TensorBoardWriter::write_event(const tensorboard::Event& event) {
  const std::string data = event.SerializeAsString();
  std::string record;
  record.reserve(data.size() + 16);
  append_little_endian<uint64_t>(record, data.size());
  append_little_endian<uint32_t>(record, masked_crc32c(record.data(), sizeof(uint64_t)));
  record += data;
  append_little_endian<uint32_t>(record, masked_crc32c(data.data(), data.size()));
  out_.write(record.data(), static_cast<std::streamsize>(record.size()));
  out_.flush();
  if (!out_) throw sdk::Error(path_.string() + ": failed to write a TensorBoard event");
}

}  // namespace ptrain::metrics
