// Watching a run from outside: TensorBoard event files read back record by
// record (CRCs recomputed here, messages decoded with the .proto), and the
// plain console of a non-terminal (built with -DPTRAIN_TENSORBOARD=ON only).
#include "catch.h"

#include "integration/small_sft_run.h"
#include "support/run_command.h"
#include "support/test_util.h"

#include "core/metrics/proto/tensorboard_event.pb.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace fs = std::filesystem;

namespace {

using ptrain::testing::run_ptrain;
using ptrain::testing::write_small_sft_config;

// Bit by bit, independent of the writer's Boost.CRC: CRC-32C, reflected
// polynomial 0x82F63B78, initial value and final XOR all ones.
uint32_t crc32c_bitwise(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (const char c : bytes) {
    crc ^= static_cast<uint8_t>(c);
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

uint32_t masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

template <typename Int>
Int little_endian(const std::string& bytes, size_t at) {
  Int value = 0;
  for (size_t i = 0; i < sizeof(Int); ++i) value |= static_cast<Int>(static_cast<uint8_t>(bytes[at + i])) << (8 * i);
  return value;
}

// The records of a TFRecord file, each checked against both of its CRCs.
std::vector<std::string> read_records(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> records;
  size_t at = 0;
  while (at < file.size()) {
    REQUIRE(at + 12 <= file.size());
    const auto length = little_endian<uint64_t>(file, at);
    REQUIRE(little_endian<uint32_t>(file, at + 8) == masked(crc32c_bitwise(file.substr(at, 8))));
    REQUIRE(at + 12 + length + 4 <= file.size());
    const std::string data = file.substr(at + 12, length);
    REQUIRE(little_endian<uint32_t>(file, at + 12 + length) == masked(crc32c_bitwise(data)));
    records.push_back(data);
    at += 12 + length + 4;
  }
  return records;
}

}  // namespace

TEST_CASE("the independent CRC-32C matches the published check value", "[monitoring]") {
  CHECK(crc32c_bitwise("123456789") == 0xE3069283u);
}

TEST_CASE("logging.tensorboard writes event files that hold every metric of metrics.jsonl and the config",
          "[monitoring]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("monitoring_tb");
  // Evaluated every 4 steps: eval/<metric> scalars in the events of steps 4, 8 and 12.
  const std::string eval = " --set eval.data=\"" + std::string(PTRAIN_SOURCE_DIR) +
                           "/data/arith/train.jsonl\" --set eval.every_steps=4 --set eval.max_examples=16";
  const auto result = run_ptrain("train -c " + write_small_sft_config(dir, "run", 3e-3).string() +
                                 " --set logging.tensorboard=true" + eval);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  // Not a terminal: plain lines every log_every steps, no bar and no cursor control.
  CHECK_THAT(result.output, Catch::Contains("step 4/12") && Catch::Contains("step 12/12"));
  CHECK_THAT(result.output, !Catch::Contains("\r") && !Catch::Contains("\033[K"));

  const fs::path run = dir / "run";
  std::vector<fs::path> event_files;
  for (const auto& entry : fs::directory_iterator(run)) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) event_files.push_back(entry.path());
  }
  REQUIRE(event_files.size() == 1);
  const std::vector<std::string> records = read_records(event_files[0]);
  const auto lines = ptrain::testing::read_metrics_jsonl(run / "metrics.jsonl");
  REQUIRE(lines.size() == 12);
  // file_version, the config as text, one event per step.
  REQUIRE(records.size() == 2 + lines.size());

  ptrain::tensorboard::Event event;
  REQUIRE(event.ParseFromString(records[0]));
  CHECK(event.file_version() == "brain.Event:2");

  REQUIRE(event.ParseFromString(records[1]));
  REQUIRE(event.summary().value_size() == 1);
  const auto& text = event.summary().value(0);
  CHECK(text.tag() == "config");
  CHECK(text.metadata().plugin_data().plugin_name() == "text");
  CHECK(text.tensor().dtype() == ptrain::tensorboard::DT_STRING);
  CHECK(text.tensor().tensor_shape().dim_size() == 0);
  REQUIRE(text.tensor().string_val_size() == 1);
  std::ifstream config_file(run / "config.toml");
  std::string expected_markdown;
  for (std::string line; std::getline(config_file, line);) expected_markdown += "    " + line + "\n";
  CHECK(text.tensor().string_val(0) == expected_markdown);
  CHECK_THAT(expected_markdown, Catch::Contains("lr = "));

  for (size_t i = 0; i < lines.size(); ++i) {
    INFO("step line " << i + 1);
    REQUIRE(event.ParseFromString(records[2 + i]));
    CHECK(event.step() == lines[i]["step"].get<int64_t>());
    CHECK(event.wall_time() > 1.6e9);
    std::map<std::string, float> scalars;
    for (const auto& value : event.summary().value()) {
      CHECK(value.value_case() == ptrain::tensorboard::Summary::Value::kSimpleValue);
      scalars[value.tag()] = value.simple_value();
    }
    CHECK(scalars.size() == lines[i].size() - 1);  // every key but "step"
    CHECK(lines[i].contains("eval/loss") == ((i + 1) % 4 == 0));
    for (const auto& [name, value] : lines[i].items()) {
      if (name == "step") continue;
      INFO("metric " << name);
      REQUIRE(scalars.count(name) == 1);
      if (value.is_null()) {
        CHECK(!std::isfinite(scalars[name]));
      } else {
        CHECK(scalars[name] == static_cast<float>(value.get<double>()));
      }
    }
  }
}
