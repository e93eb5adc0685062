// Continuing a run from a checkpoint: checks it fits the new config, and
// keeps the run directory consistent with the step it resumes from.
#pragma once

#include "core/checkpoint/checkpoint.h"
#include "core/model/causal_lm.h"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace ptrain::train {

struct ConfigChange {
  std::string key;  // "section.key"
  std::string before;
  std::string after;
};

// "section.key" → value text of a resolved config as to_toml writes it (one
// key per line; the comment after a value is dropped).
std::map<std::string, std::string> config_values(const std::string& toml);

// Keys whose values differ between two resolved configs (as written by to_toml).
std::vector<ConfigChange> config_changes(const std::string& before_toml, const std::string& after_toml);

// Refuses a checkpoint of another plugin or another model shape
// (sdk::ConfigError naming both) and warns about other changed keys
// (learning rate, step count, logging are fine). Changes nothing: a resume
// is checked before the run directory is touched.
void check_resume_fits(const checkpoint::LoadedCheckpoint& loaded, const std::string& plugin_name,
                       const std::string& resolved_config_toml, const model::CausalLm& policy);

// Copies the checkpoint's weights (check_resume_fits() passed) into `policy`.
void restore_policy(const checkpoint::LoadedCheckpoint& loaded, model::CausalLm& policy);

// Drops the lines of a per-step JSONL file (metrics.jsonl, eval_samples.jsonl)
// whose "step" is after `completed_steps` (written after the checkpoint by
// the run that stopped), so the file reads as one run. No file: nothing.
void truncate_metrics(const std::filesystem::path& metrics_path, int64_t completed_steps);

}  // namespace ptrain::train
