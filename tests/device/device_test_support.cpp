#include "device_test_support.h"

#include "catch.h"

#include "core/train/stand_in_device.h"
#include "support/test_util.h"

#include <cstdlib>
#include <fstream>

namespace ptrain::testing {
namespace {

std::vector<nlohmann::json> train(const std::filesystem::path& config, const std::filesystem::path& output_dir,
                                  const std::string& device, const std::string& extra) {
  stand_in();  // the environment the child inherits
  // A fresh run replaces what a previous section left; a resumed one continues it.
  const std::string overwrite = extra.find("--resume") == std::string::npos ? " --overwrite" : "";
  const CommandResult result = run_ptrain("train" + overwrite + " -c " + config.string() + " --set output_dir=\"" +
                                          output_dir.string() + "\" --set runtime.device=\"" + device + "\" " + extra);
  INFO("ptrain on " << device << ":\n" << result.output);
  REQUIRE(result.exit_code == 0);
  return read_metrics_jsonl(output_dir / "metrics.jsonl");
}

}  // namespace

at::Device stand_in() {
  ::setenv("PTRAIN_TEST_DEVICE", PTRAIN_STANDIN_LIBRARY, /*overwrite=*/0);
  const std::optional<at::Device> device = train::stand_in_device();
  REQUIRE(device.has_value());
  return *device;
}

std::vector<nlohmann::json> train_on_device(const std::filesystem::path& config,
                                            const std::filesystem::path& output_dir, const std::string& extra) {
  return train(config, output_dir, "auto", extra);
}

std::vector<nlohmann::json> train_on_cpu(const std::filesystem::path& config, const std::filesystem::path& output_dir,
                                         const std::string& extra) {
  return train(config, output_dir, "cpu", extra);
}

std::filesystem::path first_lines(const std::string& data_file, const std::filesystem::path& target, int count) {
  std::ifstream in(std::string(PTRAIN_SOURCE_DIR) + "/" + data_file);
  REQUIRE(in);
  std::ofstream out(target);
  std::string line;
  for (int written = 0; written < count && std::getline(in, line); ++written) out << line << '\n';
  return target;
}

void check_same_curve(const std::vector<nlohmann::json>& actual, const std::vector<nlohmann::json>& expected,
                      const std::string& key, double relative) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("step " << expected[i]["step"] << ", " << key);
    REQUIRE(actual[i].contains(key));
    CHECK(actual[i][key].get<double>() == Approx(expected[i][key].get<double>()).epsilon(relative).margin(relative));
  }
}

}  // namespace ptrain::testing
