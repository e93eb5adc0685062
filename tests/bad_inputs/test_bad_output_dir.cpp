// output_dir naming what is not ptrain's, through the `ptrain` executable:
// refused before anything is written, with every user file still there byte
// for byte; --overwrite replaces only what ptrain wrote; no removal reaches a
// protected directory or follows a symbolic link (docs/reliability.md "Run
// directories").
#include "catch.h"

#include "support/run_command.h"
#include "support/test_util.h"

#include "core/checkpoint/owned_removal.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace ptrain;
namespace fs = std::filesystem;
using testing::CommandResult;
using testing::tree_snapshot;

namespace {

// A tiny SFT run on its own two examples; output_dir comes from --set.
fs::path write_run_config(const fs::path& dir) {
  const fs::path data = testing::write_text_file(
      dir, "train.jsonl",
      "{\"prompt\": \"1+1=\", \"completion\": \"2\"}\n{\"prompt\": \"2+2=\", \"completion\": \"4\"}\n");
  const fs::path path = dir / "run.toml";
  std::ofstream(path) << "plugin = \"sft\"\n"
                      << "[model]\nvocab_size = 259\nhidden_size = 16\nintermediate_size = 32\nnum_layers = 1\n"
                      << "num_heads = 2\nnum_kv_heads = 1\nmax_position_embeddings = 32\n"
                      << "[data]\ntrain = \"" << data.string() << "\"\nmax_length = 16\n"
                      << "[batch]\nglobal_size = 2\n[train]\nmax_steps = 1\n[runtime]\nthreads = 1\n"
                      << "[checkpoint]\nevery_steps = 1\nkeep_last = 1\n";
  return path;
}

std::string train_into(const fs::path& config, const std::string& output_dir, const std::string& extra = "") {
  return "train -c " + config.string() + " --set output_dir=\"" + output_dir + "\"" + extra + " 2>&1";
}

// A user's project: code, data and notes that nothing may touch.
void fill_user_folder(const fs::path& dir) {
  testing::write_text_file(dir, "mycode.py", "print('mine')\n");
  testing::write_text_file(dir / "data", "train.jsonl", "{\"user\": \"data\"}\n");
  testing::write_text_file(dir / "notes", "thesis.txt", "chapter 1\n");
}

const std::vector<std::string> kEveryUse{"", " --overwrite", " --resume auto"};

// The refusal of a non-empty directory that is not ptrain's.
std::string not_a_run(const std::string& output_dir, const std::string& holds) {
  return "output_dir '" + output_dir +
         "' is not empty and is not a ptrain run directory (it has no ptrain_run.json): it holds " + holds;
}

// Run from `cwd`, `output_dir` is refused (exit 2, naming `message`) as a new
// run, with --overwrite and with --resume, and nothing under `watched` changes.
void check_refused_every_way(const fs::path& cwd, const fs::path& config, const std::string& output_dir,
                             const std::string& message, const fs::path& watched) {
  const auto before = tree_snapshot(watched);
  for (const std::string& use : kEveryUse) {
    const CommandResult result = testing::run_ptrain_in(cwd, train_into(config, output_dir, use));
    INFO("output_dir " << output_dir << use << ": " << result.output);
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.output, Catch::Contains(message));
    CHECK(tree_snapshot(watched) == before);
  }
}

}  // namespace

TEST_CASE("output_dir = the working directory or its parent, holding a user's files, is refused untouched",
          "[bad_inputs][output_dir]") {
  const fs::path root = testing::fresh_test_dir("output_dir_cwd");
  const fs::path config = write_run_config(root / "inputs");
  const fs::path project = root / "project";
  const fs::path work = project / "work";
  fill_user_folder(work);
  testing::write_text_file(project, "README.md", "the parent's own file\n");
  check_refused_every_way(work, config, ".", not_a_run(".", "data/, mycode.py and notes/"), project);
  check_refused_every_way(work, config, "..", not_a_run("..", "README.md and work/"), project);
}

TEST_CASE("a folder holding a user's file is refused, --overwrite included, naming what it holds",
          "[bad_inputs][output_dir]") {
  const fs::path root = testing::fresh_test_dir("output_dir_user_folder");
  const fs::path config = write_run_config(root / "inputs");
  const fs::path folder = root / "thesis";
  testing::write_text_file(folder, "thesis.txt", "years of work\n");
  check_refused_every_way(root, config, folder.string(), not_a_run(folder.string(), "thesis.txt"), folder);
}

TEST_CASE("train --overwrite replaces only what ptrain wrote in a run directory, and a user's file there stays",
          "[bad_inputs][output_dir]") {
  const fs::path root = testing::fresh_test_dir("output_dir_extra_file");
  const fs::path config = write_run_config(root / "inputs");
  const fs::path run = root / "run";
  REQUIRE(testing::run_ptrain(train_into(config, run.string())).exit_code == 0);
  testing::write_text_file(run, "notes.txt", "what I learned from this run\n");
  testing::write_text_file(run / "analysis", "plot.py", "import matplotlib\n");
  const auto user_files = [&] {
    auto tree = tree_snapshot(run);
    for (auto it = tree.begin(); it != tree.end();) {
      const bool users = it->first.rfind("notes.txt", 0) == 0 || it->first.rfind("analysis", 0) == 0;
      it = users ? std::next(it) : tree.erase(it);
    }
    return tree;
  };
  const auto before = user_files();
  REQUIRE(before.size() == 3);

  const CommandResult replaced = testing::run_ptrain(train_into(config, run.string(), " --overwrite --set seed=7"));
  INFO(replaced.output);
  REQUIRE(replaced.exit_code == 0);
  CHECK_THAT(replaced.output, Catch::Contains("--overwrite keeps what ptrain did not write in " + run.string() +
                                              ": analysis/ and notes.txt"));
  CHECK(user_files() == before);
  std::ifstream config_toml(run / "config.toml");
  CHECK_THAT(std::string(std::istreambuf_iterator<char>(config_toml), {}), Catch::Contains("seed = 7"));
  CHECK(fs::exists(run / "final" / "model.safetensors"));
  // The replaced run is gone once the new one stepped, its set-aside copy included.
  CHECK_FALSE(fs::exists(run / ".ptrain-start"));
  for (const auto& entry : fs::directory_iterator(run)) CHECK(entry.path().filename().string().rfind(".old-", 0) != 0);
}

TEST_CASE("a symlinked output_dir to a user's folder is refused, and links inside a run are never followed",
          "[bad_inputs][output_dir]") {
  const fs::path root = testing::fresh_test_dir("output_dir_symlinks");
  const fs::path config = write_run_config(root / "inputs");
  const fs::path user = root / "user";
  fill_user_folder(user / "project");
  testing::write_text_file(user / "models", "weights.bin", "my own model\n");
  testing::write_text_file(user / "old_checkpoint", "state.bin", "my own checkpoint\n");
  const auto before = tree_snapshot(user);

  fs::create_directory_symlink(user / "project", root / "linked_run");
  const std::string linked = (root / "linked_run").string();
  check_refused_every_way(root, config, linked, not_a_run(linked, "data/, mycode.py and notes/"), user);
  CHECK(fs::is_symlink(root / "linked_run"));

  // A run whose final/ and an old checkpoint are links to the user's folders:
  // pruning and replacing final/ remove the links, never what they point to.
  const fs::path run = root / "run";
  REQUIRE(testing::run_ptrain(train_into(config, run.string())).exit_code == 0);
  ptrain::checkpoint::remove_owned(run / "final");
  fs::create_directory_symlink(user / "models", run / "final");
  fs::create_directory_symlink(user / "old_checkpoint", run / "checkpoints" / "step_0");
  const CommandResult resumed =
      testing::run_ptrain(train_into(config, run.string(), " --resume auto --set train.max_steps=2"));
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK_FALSE(fs::is_symlink(run / "final"));
  CHECK(fs::exists(run / "final" / "model.safetensors"));
  CHECK(fs::is_symlink(run / "checkpoints" / "step_0"));  // not a ptrain checkpoint: keep_last leaves it
  CHECK_FALSE(fs::exists(run / "checkpoints" / "step_1"));
  CHECK(tree_snapshot(user) == before);

  // --overwrite sets the whole old run aside and deletes it, links as links.
  const CommandResult replaced = testing::run_ptrain(train_into(config, run.string(), " --overwrite"));
  INFO(replaced.output);
  REQUIRE(replaced.exit_code == 0);
  CHECK_FALSE(fs::exists(fs::symlink_status(run / "checkpoints" / "step_0")));
  CHECK(tree_snapshot(user) == before);
}

TEST_CASE("output_dir = / or ~ is refused without touching anything", "[bad_inputs][output_dir]") {
  const fs::path root = testing::fresh_test_dir("output_dir_root_home");
  const fs::path config = write_run_config(root / "inputs");
  const fs::path work = root / "work";
  fill_user_folder(work);
  const auto root_entries = [] {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator("/")) names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  };
  const std::vector<std::string> root_before = root_entries();

  check_refused_every_way(work, config, "/", not_a_run("/", ""), work);
  CHECK(root_entries() == root_before);

  for (const std::string output_dir : {"~", "~/runs/sft"}) {  // no folder named "~" appears in `work`
    check_refused_every_way(work, config, output_dir,
                            "--set output_dir=" + output_dir + ": 'output_dir' = \"" + output_dir +
                                "\" (--set output_dir=" + output_dir + "): ptrain does not expand '~'",
                            work);
  }
}

TEST_CASE("no removal reaches the root, the home or working directory, or a parent of one, or follows a link",
          "[bad_inputs][output_dir]") {
  const fs::path root = testing::fresh_test_dir("owned_removal");
  const fs::path home = root / "home";
  const fs::path cwd = home / "project";
  fill_user_folder(cwd);
  testing::write_text_file(root / "elsewhere", "keep.txt", "kept\n");
  const auto before = tree_snapshot(root);

  const fs::path saved_cwd = fs::current_path();
  const char* saved_home = std::getenv("HOME");
  const std::string saved_home_text = saved_home ? saved_home : "";
  fs::current_path(cwd);
  ::setenv("HOME", home.c_str(), 1);
  for (const fs::path& refused :
       {fs::path("/"), fs::path("."), fs::path(".."), cwd, home, root, cwd / "data" / "..", fs::path("data/..")}) {
    INFO("removing " << refused);
    CHECK_THAT(testing::error_of([&] { checkpoint::remove_owned(refused); }), Catch::Contains("refusing to remove"));
  }
  CHECK_THAT(testing::error_of([&] { checkpoint::require_removable("/"); }), Catch::Contains("the filesystem root"));
  fs::current_path(saved_cwd);
  if (saved_home) ::setenv("HOME", saved_home_text.c_str(), 1);
  CHECK(tree_snapshot(root) == before);

  // A link, alone or inside a removed folder, goes as a link.
  fs::create_directory_symlink(root / "elsewhere", root / "link");
  fs::create_directories(root / "ptrain_owned");
  fs::create_directory_symlink(root / "elsewhere", root / "ptrain_owned" / "inner_link");
  checkpoint::remove_owned(root / "link");
  checkpoint::remove_owned(root / "ptrain_owned");
  CHECK_FALSE(fs::exists(fs::symlink_status(root / "link")));
  CHECK_FALSE(fs::exists(root / "ptrain_owned"));
  CHECK(tree_snapshot(root) == before);
}
