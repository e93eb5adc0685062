#include "core/checkpoint/checkpoint.h"

#include "core/checkpoint/atomic_dir.h"
#include "core/checkpoint/json_fields.h"
#include "core/checkpoint/owned_removal.h"
#include "core/checkpoint/state_pieces.h"
#include "core/io/read_file.h"
#include "core/log/failpoint.h"
#include "core/model/safetensors.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>
#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <map>

namespace ptrain::checkpoint {
namespace fs = std::filesystem;

namespace {

void require_finite(const NamedTensors& tensors, const fs::path& target, const std::string& kind) {
  for (const auto& [name, tensor] : tensors) {
    if (tensor.is_floating_point() && !at::isfinite(tensor).all().item<bool>()) {
      throw sdk::Error(target.string() + ": refusing to write: " + kind + " tensor '" + name + "' holds NaN or Inf");
    }
  }
}

constexpr const char* kFormat = "ptrain-checkpoint-1";
constexpr const char* kManifest = "manifest.json";
constexpr const char* kLatest = "latest";

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.flush();
  if (!out) throw sdk::Error(path.string() + ": cannot write");
}

struct FileDigest {
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};

// Read in blocks: a checkpoint's weight files can be larger than memory allows twice.
FileDigest digest_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw sdk::Error(path.string() + ": cannot read");
  std::vector<char> block(4 << 20);
  uLong crc = ::crc32(0L, Z_NULL, 0);
  uint64_t bytes = 0;
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    const auto count = static_cast<uInt>(in.gcount());
    crc = ::crc32(crc, reinterpret_cast<const Bytef*>(block.data()), count);
    bytes += count;
  }
  if (in.bad()) throw sdk::Error(path.string() + ": read error");
  return {bytes, static_cast<uint32_t>(crc)};
}

// step_N → N, or -1 for anything else.
int64_t checkpoint_step(const fs::path& dir) {
  const std::string name = dir.filename().string();
  if (name.rfind("step_", 0) != 0 || name.size() == 5) return -1;
  if (!std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; })) return -1;
  return std::stoll(name.substr(5));
}

nlohmann::json parse_json(const std::string& text, const fs::path& path) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    throw sdk::Error(path.string() + ": not valid JSON: " + error.what());
  }
}

// manifest.json: the checkpoint's files with their sizes and checksums, and
// the run and step it belongs to.
struct Manifest {
  std::string run_id;
  int64_t step = 0;
  std::map<std::string, FileDigest> files;
};

Manifest read_manifest(const fs::path& path) {
  const JsonPlace place{path.string(), ""};
  const nlohmann::json json = parse_json(io::read_file(path), path);
  if (!json.is_object() || !json.contains("format") || json["format"] != kFormat) {
    throw sdk::Error(place.path + ": not a " + kFormat + " manifest (key 'format')");
  }
  Manifest manifest;
  manifest.run_id = string_field(json, "run_id", place);
  manifest.step = integer_field(json, "step", place);
  const nlohmann::json& files = json_field(json, "files", place);
  if (!files.is_object()) throw sdk::Error(place.path + ": key 'files': expected an object, got " + files.type_name());
  for (const auto& [name, entry] : files.items()) {
    const JsonPlace file_place{place.path, "files." + name};
    manifest.files[name] = {unsigned_field(entry, "bytes", file_place),
                            static_cast<uint32_t>(unsigned_field(entry, "crc32", file_place, UINT32_MAX))};
  }
  return manifest;
}

// optimizer.safetensors, or the shards the ranks of a sharded run wrote.
NamedTensors read_optimizer_state(const fs::path& dir, const std::map<std::string, FileDigest>& manifest_files) {
  if (manifest_files.count("optimizer.safetensors")) return model::read_safetensors(dir / "optimizer.safetensors");
  std::vector<NamedTensors> shards;
  for (const auto& [name, expected] : manifest_files) {
    if (is_optimizer_shard_file(name)) shards.push_back(model::read_safetensors(dir / name));
  }
  if (shards.empty()) throw sdk::Error((dir / "optimizer.safetensors").string() + ": missing from the checkpoint");
  return join_pieces(shards, dir.string());
}

}  // namespace

nlohmann::json TrainerState::to_json() const {
  nlohmann::json json{{"completed_steps", completed_steps},
                      {"skipped_steps", skipped_steps},
                      {"world_size", world_size},
                      {"plugin", plugin},
                      {"run_id", run_id}};
  if (!numeric_guard.is_null()) json["numeric_guard"] = numeric_guard;
  if (!best_model.is_null()) json["best_model"] = best_model;
  return json;
}

TrainerState TrainerState::from_json(const nlohmann::json& json, const std::string& source) {
  const JsonPlace place{source, ""};
  TrainerState state;
  state.completed_steps = integer_field(json, "completed_steps", place);
  state.skipped_steps = integer_field(json, "skipped_steps", place);
  state.world_size = static_cast<int>(unsigned_field(json, "world_size", place, INT32_MAX));
  state.plugin = string_field(json, "plugin", place);
  state.run_id = string_field(json, "run_id", place);
  // Absent in an older ptrain's checkpoints: the guard and best/ then start
  // as they did before (see numeric_guard.h and best_model.h).
  state.numeric_guard = json.value("numeric_guard", nlohmann::json());
  state.best_model = json.value("best_model", nlohmann::json());
  state.source = source;
  return state;
}

fs::path write_checkpoint(const fs::path& checkpoints_dir, const CheckpointData& data, int64_t keep_last) {
  const fs::path target = checkpoints_dir / ("step_" + std::to_string(data.trainer.completed_steps));
  // A checkpoint with NaN or Inf would poison every run resumed from it.
  require_finite(data.model->named_parameters(), target, "weight");
  require_finite(data.optimizer_state, target, "optimizer state");
  require_finite(data.plugin_state.tensors, target, "plugin state");
  write_directory_atomically(target, [&](const fs::path& staging) {
    // Checkpoints keep the float32 master weights, so a resumed run continues exactly.
    write_model_dir(*data.model, staging, at::kFloat, data.model_files ? *data.model_files : ModelDirFiles{},
                    data.weights_in_rank_files ? data.rank_files_dir : fs::path());
    failpoint::kill_point("after_model");
    if (!data.optimizer_state_sharded) model::write_safetensors(staging / "optimizer.safetensors", data.optimizer_state);
    if (!data.rank_files_dir.empty()) {
      for (const auto& entry : fs::directory_iterator(data.rank_files_dir)) {
        fs::rename(entry.path(), staging / entry.path().filename());
      }
    }
    model::write_safetensors(staging / "plugin_state.safetensors", data.plugin_state.tensors);
    write_file(staging / "plugin_state.json", data.plugin_state.meta.dump(2));
    write_file(staging / "trainer_state.json", data.trainer.to_json().dump(2));
    write_file(staging / "config.toml", data.config_toml);

    // The manifest comes last: a directory without it is incomplete.
    nlohmann::json files = nlohmann::json::object();
    for (const auto& entry : fs::directory_iterator(staging)) {
      const FileDigest digest = digest_of(entry.path());
      files[entry.path().filename().string()] = {{"bytes", digest.bytes}, {"crc32", digest.crc32}};
    }
    const nlohmann::json manifest = {
        {"format", kFormat}, {"run_id", data.trainer.run_id}, {"step", data.trainer.completed_steps}, {"files", files}};
    write_file(staging / kManifest, manifest.dump(2));
  });
  failpoint::kill_point("before_latest");
  write_file_atomically(checkpoints_dir / kLatest, target.filename().string() + "\n");
  failpoint::kill_point("before_prune");
  prune_checkpoints(checkpoints_dir, keep_last);
  return target;
}

LoadedCheckpoint read_checkpoint(const fs::path& dir) {
  const fs::path manifest_path = dir / kManifest;
  if (!fs::exists(manifest_path)) {
    throw sdk::Error(manifest_path.string() + ": missing; the checkpoint is incomplete (interrupted while saving?)");
  }
  const Manifest manifest = read_manifest(manifest_path);
  for (const auto& [name, expected] : manifest.files) {
    const fs::path file = dir / name;
    if (!fs::exists(file)) throw sdk::Error(file.string() + ": missing from the checkpoint (listed in manifest.json)");
    const FileDigest digest = digest_of(file);
    if (digest.bytes != expected.bytes) {
      throw sdk::Error(file.string() + ": " + std::to_string(digest.bytes) + " bytes, manifest.json says " +
                       std::to_string(expected.bytes) + " (truncated or replaced)");
    }
    if (digest.crc32 != expected.crc32) {
      throw sdk::Error(file.string() + ": checksum differs from manifest.json (the file is corrupt)");
    }
  }

  LoadedCheckpoint loaded;
  loaded.dir = dir;
  const fs::path trainer_path = dir / "trainer_state.json";
  loaded.trainer = TrainerState::from_json(parse_json(io::read_file(trainer_path), trainer_path), trainer_path.string());
  if (manifest.run_id != loaded.trainer.run_id || manifest.step != loaded.trainer.completed_steps) {
    throw sdk::Error(manifest_path.string() + ": belongs to another run or step than trainer_state.json");
  }
  if (model::is_lora_adapter_dir(dir)) {
    loaded.adapter = model::read_lora_adapter_dir(dir);
  } else {
    loaded.model = model::CausalLm::load_hf_dir(dir);
  }
  loaded.optimizer_state = read_optimizer_state(dir, manifest.files);
  loaded.plugin_state.tensors = model::read_safetensors(dir / "plugin_state.safetensors");
  loaded.plugin_state.meta = parse_json(io::read_file(dir / "plugin_state.json"), dir / "plugin_state.json");
  loaded.config_toml = io::read_file(dir / "config.toml");
  return loaded;
}

std::optional<fs::path> find_resume_checkpoint(const std::string& resume, const fs::path& output_dir) {
  const auto from_latest = [](const fs::path& checkpoints_dir) -> std::optional<fs::path> {
    const fs::path latest = checkpoints_dir / kLatest;
    if (!fs::exists(latest)) return std::nullopt;
    std::string name = io::read_file(latest);
    name.erase(name.find_last_not_of(" \n\r\t") + 1);
    return checkpoints_dir / name;
  };
  if (resume == "auto") return from_latest(output_dir / "checkpoints");
  const fs::path path(resume);
  if (fs::exists(path / kManifest)) return path;
  if (auto latest = from_latest(path)) return latest;
  if (auto latest = from_latest(path / "checkpoints")) return latest;
  throw sdk::Error(path.string() +
                   ": no checkpoint here (expected a checkpoints/step_N directory with manifest.json, "
                   "or a directory holding a `latest` pointer)");
}

void save_model_atomically(const model::CausalLm& model, const fs::path& target, at::ScalarType dtype,
                           const ModelDirFiles& files, const model::CausalLm* merged, const fs::path& weights_from) {
  require_finite(model.named_parameters(), target, "weight");
  if (merged) require_finite(merged->named_parameters(), target / "merged", "weight");
  write_directory_atomically(target, [&](const fs::path& staging) {
    write_model_dir(model, staging, dtype, files, weights_from);
    if (merged) write_model_dir(*merged, staging / "merged", dtype, files);
  });
}

bool is_ptrain_checkpoint(const fs::path& dir) {
  std::error_code error;
  if (!fs::is_directory(fs::symlink_status(dir, error)) || checkpoint_step(dir) < 0) return false;
  std::ifstream in(dir / kManifest);
  const nlohmann::json manifest = nlohmann::json::parse(in, nullptr, false);
  return manifest.is_object() && manifest.value("format", "") == kFormat;
}

void prune_checkpoints(const fs::path& checkpoints_dir, int64_t keep_last) {
  std::error_code error;
  if (!fs::is_directory(checkpoints_dir, error)) return;
  std::vector<std::pair<int64_t, fs::path>> checkpoints;
  for (const auto& entry : fs::directory_iterator(checkpoints_dir)) {
    if (is_ptrain_checkpoint(entry.path())) checkpoints.emplace_back(checkpoint_step(entry.path()), entry.path());
  }
  std::sort(checkpoints.begin(), checkpoints.end());
  const auto excess = static_cast<int64_t>(checkpoints.size()) - keep_last;
  for (int64_t i = 0; i < excess; ++i) remove_owned(checkpoints[i].second);
}

}  // namespace ptrain::checkpoint
