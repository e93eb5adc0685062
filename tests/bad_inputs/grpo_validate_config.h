// The small GRPO run that bad-input cases of the reward keys hand to
// `ptrain validate`: one prompt, a tiny random model, and the case's own
// [module] line last, at line 18, where the error must point.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace ptrain::testing {

inline std::filesystem::path write_grpo_validate_config(const std::filesystem::path& dir, const std::string& line_18) {
  std::ofstream(dir / "prompts.jsonl") << R"({"prompt": "1+1=", "answer": "2"})"
                                       << "\n";
  const std::filesystem::path path = dir / "grpo.toml";
  std::ofstream(path) << "plugin = \"grpo\"\n"                                               // 1
                      << "output_dir = \"" << (dir / "run").string() << "\"\n"               // 2
                      << "[model]\nvocab_size = 259\nhidden_size = 16\n"                     // 3-5
                      << "intermediate_size = 32\nnum_layers = 1\nnum_heads = 2\n"           // 6-8
                      << "num_kv_heads = 1\n"                                                // 9
                      << "[data]\ntrain = \"" << (dir / "prompts.jsonl").string() << "\"\n"  // 10-11
                      << "[batch]\nglobal_size = 1\n[train]\nmax_steps = 1\n"                // 12-15
                      << "[module]\nnum_generations = 2\n"                                   // 16-17
                      << line_18 << "\n";                                                    // 18
  return path;
}

}  // namespace ptrain::testing
