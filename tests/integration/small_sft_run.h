// A one-layer SFT run on the bundled arithmetic data that trains 12 steps (by
// default) in seconds: what the tests of a run's outputs (event files, reports) train.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace ptrain::testing {

// Writes dir/<name>.toml, whose run goes to dir/<name>, and returns its path.
inline std::filesystem::path write_small_sft_config(const std::filesystem::path& dir, const std::string& name,
                                                    double lr, int max_steps = 12) {
  const std::filesystem::path path = dir / (name + ".toml");
  std::ofstream(path) << "plugin = \"sft\"\nseed = 1\noutput_dir = \"" << (dir / name).string() << "\"\n"
                      << "[model]\nvocab_size = 259\nhidden_size = 32\nintermediate_size = 64\nnum_layers = 1\n"
                      << "num_heads = 2\nnum_kv_heads = 1\nmax_position_embeddings = 32\n"
                      << "[data]\ntrain = \"" << PTRAIN_SOURCE_DIR << "/data/arith/train.jsonl\"\nmax_length = 16\n"
                      << "[batch]\nglobal_size = 8\n"
                      << "[optim]\nlr = " << lr << "\n"
                      << "[train]\nmax_steps = " << max_steps << "\nlog_every = 4\n"
                      << "[runtime]\nthreads = 1\n";
  return path;
}

}  // namespace ptrain::testing
