#include "core/train/run_directory.h"

#include "core/checkpoint/remove_tree.h"
#include "core/log/logger.h"
#include "ptrain/sdk/errors.h"

#include <fstream>

namespace ptrain::train {
namespace fs = std::filesystem;

namespace {

bool holds_a_run(const fs::path& dir) {
  std::error_code error;
  return fs::exists(dir, error) && !(fs::is_directory(dir, error) && fs::is_empty(dir, error));
}

void write_text_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw sdk::Error(path.string() + ": cannot write");
}

}  // namespace

RunDirectory::RunDirectory(fs::path dir, bool overwrite, bool resuming)
    : dir_(std::move(dir)), overwrite_(overwrite), resuming_(resuming) {
  if (holds_a_run(dir_) && !overwrite_ && !resuming_) {
    throw sdk::ConfigError("output_dir '" + dir_.string() +
                           "' already holds a run; pass --resume auto to continue it, --overwrite to replace it, "
                           "or choose another output_dir");
  }
}

void RunDirectory::create(dist::Communicator& communicator, const std::string& resolved_config_toml) const {
  const bool is_main = communicator.rank() == 0;
  if (is_main) {
    if (!resuming_ && overwrite_ && holds_a_run(dir_)) checkpoint::remove_tree(dir_);
    fs::create_directories(dir_);
  }
  communicator.barrier();
  log::add_log_file(dir_, communicator.rank());
  if (is_main) write_text_file(dir_ / "config.toml", resolved_config_toml);
}

}  // namespace ptrain::train
