// A checkpoint's JSON files with a value of the wrong type (hand-edited or
// damaged): each refused naming the file and the key, not with a bare JSON
// library type error.
#include "catch.h"

#include "bad_inputs/rejection.h"
#include "support/run_command.h"
#include "support/test_util.h"

#include "core/checkpoint/checkpoint.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

using namespace ptrain;
namespace fs = std::filesystem;

namespace {

const nlohmann::json kManifest = {{"format", "ptrain-checkpoint-1"},
                                  {"run_id", "0123456789abcdef"},
                                  {"step", 2},
                                  {"files", nlohmann::json::object()}};
const nlohmann::json kTrainerState = {
    {"completed_steps", 2}, {"skipped_steps", 0}, {"world_size", 1}, {"plugin", "sft"}, {"run_id", "0123456789abcdef"}};

struct JsonCase {
  const char* name;
  const char* file;
  nlohmann::json::json_pointer key;
  nlohmann::json value;
  std::string message;  // after the file's path
};

}  // namespace

TEST_CASE("checkpoint JSON with a value of the wrong type names the file and the key", "[bad_inputs][checkpoint]") {
  using Pointer = nlohmann::json::json_pointer;
  const std::vector<JsonCase> cases = {
      {"a string step", "manifest.json", Pointer("/step"), "2", ": key 'step': expected an integer, got string \"2\""},
      {"a numeric run_id", "manifest.json", Pointer("/run_id"), 7, ": key 'run_id': expected a string, got number 7"},
      {"files a list", "manifest.json", Pointer("/files"), nlohmann::json::array(),
       ": key 'files': expected an object, got array"},
      {"a string file size",
       "manifest.json",
       Pointer("/files/model.safetensors"),
       {{"bytes", "12"}, {"crc32", 5}},
       ": key 'files.model.safetensors.bytes': expected an integer in [0, 18446744073709551615], got string \"12\""},
      {"a negative checksum",
       "manifest.json",
       Pointer("/files/model.safetensors"),
       {{"bytes", 12}, {"crc32", -5}},
       ": key 'files.model.safetensors.crc32': expected an integer in [0, 4294967295], got number -5"},
      {"a file entry that is no object", "manifest.json", Pointer("/files/model.safetensors"), 12,
       ": key 'files.model.safetensors': expected a JSON object, got number"},
      {"another format", "manifest.json", Pointer("/format"), 1, ": not a ptrain-checkpoint-1 manifest (key 'format')"},
      {"a fractional step count", "trainer_state.json", Pointer("/completed_steps"), 2.5,
       ": key 'completed_steps': expected an integer, got number 2.5"},
      {"a missing world size", "trainer_state.json", Pointer("/world_size"), nullptr, ": key 'world_size'"},
  };
  for (const JsonCase& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const fs::path dir = testing::fresh_test_dir("bad_checkpoint") / "step_2";
      fs::create_directories(dir);
      nlohmann::json manifest = kManifest, trainer_state = kTrainerState;
      nlohmann::json& spoiled = std::string(c.file) == "manifest.json" ? manifest : trainer_state;
      if (c.value.is_null()) {
        spoiled.erase(c.key.back());
      } else {
        spoiled[c.key] = c.value;
      }
      testing::write_text_file(dir, "manifest.json", manifest.dump());
      testing::write_text_file(dir, "trainer_state.json", trainer_state.dump());
      testing::check_rejected([&] { checkpoint::read_checkpoint(dir); }, "Error", (dir / c.file).string() + c.message);
    }
  }
}
