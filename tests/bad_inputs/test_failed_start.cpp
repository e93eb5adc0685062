// Nothing is lost to a failed start (docs/reliability.md): bad inputs that
// used to surface only after --overwrite had deleted the previous run are
// refused before the run directory is touched, and a start that fails (or
// dies) before its first step leaves the previous run as it was, byte for
// byte. Through the `ptrain` executable.
#include "catch.h"

#include "support/run_command.h"
#include "support/test_util.h"

#include "core/model/lora.h"
#include "core/model/safetensors.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

using namespace ptrain;
namespace fs = std::filesystem;
using testing::CommandResult;
using testing::tree_snapshot;

namespace {

const char* const kModel =
    "[model]\nvocab_size = 259\nhidden_size = 16\nintermediate_size = 32\nnum_layers = 1\n"
    "num_heads = 2\nnum_kv_heads = 1\nmax_position_embeddings = 32\n";

// `plugin`'s tiny run on `data` in dir/<name>.toml, with `extra` lines
// (sections) last; output_dir comes from --set.
fs::path write_config(const fs::path& dir, const std::string& name, const std::string& plugin, const fs::path& data,
                      const std::string& extra) {
  const fs::path path = dir / (name + ".toml");
  std::ofstream(path) << "plugin = \"" << plugin << "\"\n"
                      << kModel << "[data]\ntrain = \"" << data.string() << "\"\nmax_length = 16\n"
                      << "[batch]\nglobal_size = 2\n[train]\nmax_steps = 1\n[runtime]\nthreads = 1\n"
                      << "[checkpoint]\nevery_steps = 1\n"
                      << extra;
  return path;
}

// "file:line" of the line of `file` that sets `key`.
std::string where_set(const fs::path& file, const std::string& key) {
  std::ifstream in(file);
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.rfind(key + " =", 0) == 0) return file.string() + ":" + std::to_string(number);
  }
  return file.string() + ": (no " + key + ")";
}

std::string train_into(const fs::path& config, const fs::path& output_dir, const std::string& extra = "") {
  return "train -c " + config.string() + " --set output_dir=\"" + output_dir.string() + "\"" + extra + " 2>&1";
}

// The run a failed start must leave alone: one SFT step with its checkpoint.
struct PreviousRun {
  fs::path root;
  fs::path config;  // the SFT config that made it
  fs::path dir;

  explicit PreviousRun(const std::string& name)
      : root(testing::fresh_test_dir(name)),
        config(write_config(root, "sft", "sft",
                            testing::write_text_file(root, "sft.jsonl",
                                                     "{\"prompt\": \"1+1=\", \"completion\": \"2\"}\n"
                                                     "{\"prompt\": \"2+2=\", \"completion\": \"4\"}\n"),
                            "")),
        dir(root / "run") {
    const CommandResult made = testing::run_ptrain(train_into(config, dir));
    INFO(made.output);
    REQUIRE(made.exit_code == 0);
  }
  // Everything in it but the lock file, whose holder line each start
  // rewrites, and the names in `also_ignored`.
  std::map<std::string, std::string> snapshot(std::vector<std::string> also_ignored = {}) const {
    also_ignored.push_back("ptrain.lock");
    return tree_snapshot(dir, also_ignored);
  }
};

// How a failed start left the previous run alone.
enum class Kept {
  kUntouched,  // refused before the run directory changed
  kPutBack,    // the start changed it, failed before its first step, and undid its changes
};

// `start` fails with `exit_code` and `message`, and the previous run is as it
// was. (`ignored`: names the start may change, e.g. the log a resume appends to.)
void check_refused_intact(const PreviousRun& previous, const std::string& start, int exit_code,
                          const std::string& message, Kept kept, const std::vector<std::string>& ignored = {}) {
  const auto before = previous.snapshot(ignored);
  const CommandResult result = testing::run_command(start);
  INFO(result.output);
  CHECK(result.exit_code == exit_code);
  CHECK_THAT(result.output, Catch::Contains(message));
  const std::string undone =
      "the run ended before its first step: output_dir '" + previous.dir.string() + "' is as it was before";
  if (kept == Kept::kUntouched) CHECK_THAT(result.output, !Catch::Contains(undone));
  if (kept == Kept::kPutBack) CHECK_THAT(result.output, Catch::Contains(undone));
  CHECK(previous.snapshot(ignored) == before);
}

// A PEFT adapter for the tiny model (q_proj, r = 2) whose lora_A holds a NaN.
fs::path write_nan_adapter(const fs::path& dir) {
  fs::create_directories(dir);
  std::ofstream(dir / "adapter_config.json")
      << R"({"peft_type": "LORA", "r": 2, "lora_alpha": 16, "target_modules": ["q_proj"], "bias": "none"})";
  at::Tensor a = at::zeros({2, 16});
  a[0][3] = std::numeric_limits<float>::quiet_NaN();
  model::write_safetensors(dir / "adapter_model.safetensors",
                           {{model::lora_key(0, model::LoraTarget::kQ, 'A'), a},
                            {model::lora_key(0, model::LoraTarget::kQ, 'B'), at::zeros({16, 2})}});
  return dir;
}

const char* const kPairs =
    "{\"prompt\": \"1+1=\", \"chosen\": \"2\", \"rejected\": \"3\"}\n"
    "{\"prompt\": \"2+2=\", \"chosen\": \"4\", \"rejected\": \"5\"}\n";

}  // namespace

TEST_CASE("inputs once caught after --overwrite had deleted the old run are refused before it is touched",
          "[bad_inputs][failed_start]") {
  const PreviousRun previous("failed_start_inputs");
  const fs::path& root = previous.root;
  const std::string ptrain = std::string(PTRAIN_EXE) + " ";

  SECTION("an input adapter with NaN weights, named as the input's") {
    const fs::path adapter = write_nan_adapter(root / "nan_adapter");
    const fs::path config =
        write_config(root, "sft_lora", "sft", root / "sft.jsonl",
                     "[lora]\nrank = 2\ntarget_modules = [\"q_proj\"]\ninit = \"" + adapter.string() + "\"\n");
    check_refused_intact(previous, ptrain + train_into(config, previous.dir, " --overwrite"), 1,
                         (adapter / "adapter_model.safetensors").string() + ": tensor '" +
                             model::lora_key(0, model::LoraTarget::kQ, 'A') + "' holds 1 NaN or Inf values of 32",
                         Kept::kUntouched);
  }

  SECTION("a DPO reference_cache that is no cache: a config error naming the key, the user's file untouched") {
    const fs::path notes = testing::write_text_file(root, "notes.txt", "my notes, not a cache\n");
    const fs::path config =
        write_config(root, "dpo", "dpo", testing::write_text_file(root, "pairs.jsonl", kPairs),
                     "[module]\nprecompute_reference = true\nreference_cache = \"" + notes.string() + "\"\n");
    const std::string start = ptrain + train_into(config, previous.dir, " --overwrite");
    check_refused_intact(previous, start, 2,
                         where_set(config, "reference_cache") + ": key 'module.reference_cache': " + notes.string() +
                             ": not a ptrain DPO reference cache",
                         Kept::kUntouched);
    const CommandResult again = testing::run_command(start);
    CHECK_THAT(again.output, !Catch::Contains("elete"));
    std::ifstream in(notes);
    CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == "my notes, not a cache\n");
  }

  SECTION("a GRPO prompt with a role the chat template does not know") {
    const fs::path prompts =
        testing::write_text_file(root, "prompts.jsonl",
                                 "{\"prompt\": \"1+1=\", \"answer\": \"2\"}\n"
                                 "{\"messages\": [{\"role\": \"robot\", \"content\": \"2+2=\"}], \"answer\": \"4\"}\n");
    const fs::path config = write_config(root, "grpo", "grpo", prompts, "[module]\nnum_generations = 2\n");
    check_refused_intact(previous, ptrain + train_into(config, previous.dir, " --overwrite"), 2,
                         prompts.string() + ":2: field 'messages[0].role': unknown role \"robot\"", Kept::kUntouched);
  }

  SECTION("DPO's sync_reference with [lora]: a config error naming both keys") {
    const fs::path config = write_config(root, "dpo_lora", "dpo", testing::write_text_file(root, "pairs.jsonl", kPairs),
                                         "[module]\nsync_reference = true\n[lora]\nrank = 2\n");
    check_refused_intact(previous, ptrain + train_into(config, previous.dir, " --overwrite"), 2,
                         where_set(config, "sync_reference") +
                             ": key 'module.sync_reference' = true cannot be combined with key 'lora.rank' > 0",
                         Kept::kUntouched);
  }

  SECTION("a refused --resume leaves config.toml as it was") {
    check_refused_intact(previous,
                         ptrain + train_into(previous.config, previous.dir,
                                             " --resume auto --set model.hidden_size=32 --set train.max_steps=2"),
                         2, "differs in shape from the configured one", Kept::kUntouched);
  }
}

TEST_CASE("a start that fails or dies before its first step leaves the previous run as it was",
          "[bad_inputs][failed_start]") {
  const PreviousRun previous("failed_start_step");
  const fs::path& root = previous.root;
  const std::string ptrain = std::string(PTRAIN_EXE) + " ";
  // Aborts in the first step: a NaN there, and no skipped step allowed.
  const std::string failing_step = " --set train.max_consecutive_skips=1";
  const std::string nan_at_1 = "PTRAIN_TEST_NAN_AT=1 ";
  const std::string nan_at_2 = "PTRAIN_TEST_NAN_AT=2 ";

  SECTION("--overwrite whose first step fails puts the old run back") {
    check_refused_intact(previous,
                         nan_at_1 + ptrain + train_into(previous.config, previous.dir, " --overwrite" + failing_step),
                         1, "1 consecutive updates had a non-finite loss", Kept::kPutBack);
  }

  SECTION("--resume whose first step fails puts config.toml and metrics.jsonl back") {
    check_refused_intact(previous,
                         nan_at_2 + ptrain +
                             train_into(previous.config, previous.dir,
                                        " --resume auto --set train.max_steps=2 --set seed=9" + failing_step),
                         1, "1 consecutive updates had a non-finite loss", Kept::kPutBack, {"log_rank0.txt"});
  }

  SECTION("data with no trainable token, found while preparing it: --overwrite puts the old run back, a new run "
          "leaves no directory") {
    const fs::path long_prompts = testing::write_text_file(
        root, "long_prompts.jsonl",
        "{\"prompt\": \"a prompt longer than max_length\", \"completion\": \"2\"}\n"
        "{\"prompt\": \"another prompt past max_length\", \"completion\": \"4\"}\n");
    const std::string data = " --set data.train=\"" + long_prompts.string() + "\"";
    const std::string refusal = long_prompts.string() + ": none of its 2 examples has a trainable token left within "
                                                        "data.max_length = 16";
    // A data error: exit 2, as every bad input (README).
    check_refused_intact(previous, ptrain + train_into(previous.config, previous.dir, " --overwrite" + data), 2,
                         refusal, Kept::kPutBack);
    const CommandResult fresh = testing::run_command(ptrain + train_into(previous.config, root / "new_run", data));
    INFO(fresh.output);
    CHECK(fresh.exit_code == 2);
    CHECK_THAT(fresh.output, Catch::Contains(refusal));
    CHECK_FALSE(fs::exists(root / "new_run"));
  }

  SECTION("a new run whose first step fails leaves no directory") {
    const CommandResult result =
        testing::run_command(nan_at_1 + ptrain + train_into(previous.config, root / "new_run", failing_step));
    INFO(result.output);
    CHECK(result.exit_code == 1);
    CHECK_FALSE(fs::exists(root / "new_run"));
  }

  SECTION("a start killed after setting up, or while setting the old run aside, is undone by the next start") {
    const auto before = previous.snapshot();
    for (const std::string point : {"after_run_directory_start", "while_setting_aside:3"}) {
      const CommandResult killed = testing::run_command("PTRAIN_TEST_KILL_AT=" + point + " " + ptrain +
                                                        train_into(previous.config, previous.dir, " --overwrite"));
      INFO(point << ": " << killed.output);
      CHECK(killed.exit_code == 137);
      CHECK(previous.snapshot() != before);
      // The next start (here one refused for its data) first puts the old run back.
      const fs::path bad = testing::write_text_file(root, "bad.jsonl", "{\"prompt\": \"a\"}\n");
      const CommandResult next = testing::run_command(
          ptrain + train_into(previous.config, previous.dir, " --overwrite --set data.train=\"" + bad.string() + "\""));
      INFO(next.output);
      CHECK(next.exit_code == 2);
      CHECK_THAT(next.output, Catch::Contains("an earlier start (a new run) ended before its first step; put back "
                                              "what it had replaced"));
      CHECK(previous.snapshot() == before);
    }
  }
}
