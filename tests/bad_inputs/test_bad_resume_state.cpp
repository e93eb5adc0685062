// A checkpoint whose trainer_state.json holds a damaged record of the
// numeric guard or of best/ (hand-edited): the guard's is refused naming the
// file and the key, before the run directory is touched; best/'s is set aside
// with a warning (the resumed run starts a new best/). The checkpoint itself
// is kept either way.
#include "catch.h"

#include "support/run_command.h"
#include "support/test_util.h"

#include <nlohmann/json.hpp>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>

using namespace ptrain;
namespace fs = std::filesystem;

namespace {

// Two SFT steps into dir/run with a checkpoint after each, evaluated on the
// training examples with best/ kept by eval/loss.
fs::path write_config(const fs::path& dir) {
  const fs::path train = testing::write_text_file(
      dir, "train.jsonl", "{\"prompt\": \"1+1=\", \"completion\": \"2\"}\n{\"prompt\": \"2+2=\", \"completion\": \"4\"}\n");
  const fs::path path = dir / "resume.toml";
  std::ofstream(path) << "plugin = \"sft\"\noutput_dir = \"" << (dir / "run").string() << "\"\n"
                      << "[model]\nvocab_size = 259\nhidden_size = 16\nintermediate_size = 32\nnum_layers = 1\n"
                      << "num_heads = 2\nnum_kv_heads = 1\nmax_position_embeddings = 32\n"
                      << "[data]\ntrain = \"" << train.string() << "\"\nmax_length = 16\n"
                      << "[batch]\nglobal_size = 2\n[train]\nmax_steps = 2\n[runtime]\nthreads = 1\n"
                      << "[checkpoint]\nevery_steps = 1\nbest_metric = \"eval/loss\"\n"
                      << "[eval]\ndata = \"" << train.string() << "\"\nevery_steps = 1\n";
  return path;
}

// Rewrites `name` in checkpoint `dir` and its size and CRC-32 in
// manifest.json, as a hand edit that also fixed the manifest would: the
// record itself, not the checksum, is what is wrong.
void rewrite_checkpoint_file(const fs::path& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir / name) << text;
  nlohmann::json manifest = nlohmann::json::parse(std::ifstream(dir / "manifest.json"));
  const auto* bytes = reinterpret_cast<const Bytef*>(text.data());
  manifest["files"][name] = {{"bytes", text.size()}, {"crc32", ::crc32(0L, bytes, static_cast<uInt>(text.size()))}};
  std::ofstream(dir / "manifest.json") << manifest.dump(2);
}

// Every file under a directory with its size and modification time (clock ticks).
using Listing = std::map<std::string, std::pair<std::uintmax_t, int64_t>>;

Listing listing(const fs::path& dir) {
  Listing files;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(dir)) {
    const std::uintmax_t size = entry.is_regular_file() ? entry.file_size() : 0;
    files[entry.path().string()] = {size, static_cast<int64_t>(entry.last_write_time().time_since_epoch().count())};
  }
  return files;
}

// Trains the two steps, then replaces `key` of step_2's trainer_state.json
// with `value` and resumes for a third step. Returns the resumed run;
// `before`, if given, gets the run directory's listing just before it.
testing::CommandResult resume_spoiled(
    const fs::path& dir, const nlohmann::json::json_pointer& key, const nlohmann::json& value,
    Listing* before = nullptr) {
  const fs::path config = write_config(dir);
  const testing::CommandResult first = testing::run_ptrain("train -c " + config.string() + " 2>&1");
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  const fs::path checkpoint = dir / "run" / "checkpoints" / "step_2";
  nlohmann::json state = nlohmann::json::parse(std::ifstream(checkpoint / "trainer_state.json"));
  REQUIRE(state.contains(key));
  state[key] = value;
  rewrite_checkpoint_file(checkpoint, "trainer_state.json", state.dump(2));
  if (before != nullptr) *before = listing(dir / "run");
  return testing::run_ptrain("train -c " + config.string() + " --set train.max_steps=3 --resume auto 2>&1");
}

}  // namespace

TEST_CASE("a checkpoint's numeric guard record of the wrong type is refused naming the file and the key",
          "[bad_inputs][checkpoint][resume]") {
  const fs::path dir = testing::fresh_test_dir("bad_guard_record");
  Listing before;
  const testing::CommandResult result =
      resume_spoiled(dir, nlohmann::json::json_pointer("/numeric_guard/loss_spikes"), "3", &before);
  INFO(result.output);
  CHECK(result.exit_code != 0);
  const fs::path state_path = dir / "run" / "checkpoints" / "step_2" / "trainer_state.json";
  CHECK(testing::contains(result.output, state_path.string() +
                                             ": key 'numeric_guard.loss_spikes': expected an integer, got string \"3\""));
  CHECK(fs::exists(state_path));
  CHECK_FALSE(fs::exists(dir / "run" / "checkpoints" / "step_3"));
  // Refused before the run directory is touched: not a file written, added or
  // removed, but for the lock every start takes first (it holds the pid).
  Listing after = listing(dir / "run");
  for (Listing* files : {&before, &after}) files->erase((dir / "run" / "ptrain.lock").string());
  CHECK(after.size() == before.size());
  for (const auto& [path, file] : before) {
    INFO(path);
    REQUIRE(after.count(path) == 1);
    CHECK(after.at(path) == file);
  }
}

TEST_CASE("a checkpoint's best/ record of another metric is set aside with a warning", "[bad_inputs][checkpoint][resume]") {
  const fs::path dir = testing::fresh_test_dir("bad_best_record");
  const testing::CommandResult result =
      resume_spoiled(dir, nlohmann::json::json_pointer("/best_model/metric"), "eval/accuracy");
  INFO(result.output);
  CHECK(result.exit_code == 0);
  CHECK(testing::contains(result.output,
                          "the checkpoint does not describe a best eval/loss (min); the resumed run starts a new best/"));
  CHECK(fs::exists(dir / "run" / "checkpoints" / "step_3"));
}
