#include "core/train/rank_agreement.h"

#include "core/train/resume.h"
#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/fingerprint.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <map>

namespace ptrain::train {
namespace fs = std::filesystem;

namespace {

constexpr const char* kConfigAspect = "config";
// How much of each rank's account of its differences every rank receives.
constexpr int64_t kAccountBytes = 2048;
// Ranks named in detail; the rest are counted.
constexpr size_t kRanksNamed = 4;

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A file's content fingerprint, read in blocks (a dataset may be large).
std::string file_text(const std::string& path) {
  if (path.empty()) return "none";
  std::ifstream in(path, std::ios::binary);
  if (!in) return path + " (unreadable here)";
  uint64_t hash = sdk::kFnv1aOffset;
  std::vector<char> block(1 << 20);
  while (in.read(block.data(), static_cast<std::streamsize>(block.size())) || in.gcount() > 0) {
    hash = sdk::fnv1a(std::string_view(block.data(), static_cast<size_t>(in.gcount())), hash);
  }
  return path + " (content " + sdk::hex64(hash) + ")";
}

std::string resume_text(const std::optional<fs::path>& checkpoint) {
  if (!checkpoint) return "a fresh start at step 0 (no checkpoint found)";
  const nlohmann::json state = nlohmann::json::parse(read_bytes(*checkpoint / "trainer_state.json"), nullptr, false);
  const bool readable = state.is_object() && state.contains("completed_steps");
  return "the checkpoint after step " + (readable ? state["completed_steps"].dump() : std::string("?")) + " of run " +
         (readable ? state.value("run_id", "?") : std::string("?")) + " at " + checkpoint->string() +
         " (manifest " + sdk::hex64(sdk::fnv1a(read_bytes(*checkpoint / "manifest.json"))) + ")";
}

// The resolved config's "key = value" lines but output_dir, sorted by key.
std::string config_text(const std::string& resolved_config_toml) {
  std::string text;
  for (const auto& [key, value] : config_values(resolved_config_toml)) {
    if (key != "output_dir") text += key + " = " + value + "\n";
  }
  return text;
}

at::Tensor bytes_tensor(const std::string& text, int64_t size) {
  at::Tensor bytes = at::zeros({size}, at::kByte);
  std::memcpy(bytes.data_ptr(), text.data(), std::min<size_t>(text.size(), static_cast<size_t>(size)));
  return bytes;
}

std::string tensor_text(const at::Tensor& bytes) {
  const char* data = static_cast<const char*>(bytes.data_ptr());
  return std::string(data, strnlen(data, static_cast<size_t>(bytes.numel())));
}

// Rank 0's aspects on every rank: their texts, one after another, NUL-separated.
std::vector<std::string> rank0_texts(dist::Communicator& communicator, const std::vector<RunAspect>& aspects) {
  std::string joined;
  for (const RunAspect& aspect : aspects) joined += aspect.text + '\0';
  std::vector<at::Tensor> size{at::scalar_tensor(static_cast<int64_t>(joined.size()), at::kLong)};
  communicator.broadcast(size, 0);
  std::vector<at::Tensor> bytes{bytes_tensor(joined, size[0].item<int64_t>())};
  communicator.broadcast(bytes, 0);
  std::vector<std::string> texts;
  const char* data = static_cast<const char*>(bytes[0].data_ptr());
  for (int64_t start = 0, end = 0; end < bytes[0].numel(); ++end) {
    if (data[end] != '\0') continue;
    texts.emplace_back(data + start, static_cast<size_t>(end - start));
    start = end + 1;
  }
  return texts;
}

// How this rank differs from rank 0, in words: "" when it does not.
std::string account_of_differences(const std::vector<RunAspect>& aspects, const std::vector<std::string>& rank0,
                                   int rank) {
  std::string account;
  for (size_t i = 0; i < aspects.size() && i < rank0.size(); ++i) {
    if (aspects[i].text == rank0[i]) continue;
    account += account.empty() ? "" : "; ";
    if (aspects[i].name != kConfigAspect) {
      account += aspects[i].name + " is " + aspects[i].text + " (rank 0: " + rank0[i] + ")";
      continue;
    }
    std::string keys;
    for (const ConfigChange& change : config_changes(rank0[i], aspects[i].text)) {
      keys += (keys.empty() ? "" : ", ") + change.key + " = " + change.after + " (rank 0: " + change.before + ")";
    }
    account += "config keys " + keys;
  }
  return account.empty() ? "" : "rank " + std::to_string(rank) + ": " + account;
}

// Every rank's `row` in a [world_size, row length] tensor on every rank: a
// SUM of rows that are zero but on their own rank, exact for integers. (An
// all-reduce, which the communicator stages on the device under NCCL.)
at::Tensor gather_rows(dist::Communicator& communicator, const at::Tensor& row) {
  std::vector<at::Tensor> rows{at::zeros({communicator.world_size(), row.numel()}, row.options())};
  rows[0][communicator.rank()].copy_(row);
  communicator.all_reduce_sum(rows);
  return rows[0];
}

// Every rank's account, on every rank.
std::vector<std::string> gather_accounts(dist::Communicator& communicator, const std::string& own) {
  const at::Tensor all =
      gather_rows(communicator, bytes_tensor(own.substr(0, kAccountBytes - 1), kAccountBytes)).reshape({-1});
  std::vector<std::string> accounts;
  for (int rank = 0; rank < communicator.world_size(); ++rank) {
    accounts.push_back(tensor_text(all.narrow(0, rank * kAccountBytes, kAccountBytes)));
  }
  return accounts;
}

}  // namespace

std::vector<RunAspect> run_aspects(const config::RunConfig& config, const plugin::LoadedPlugin& plugin,
                                   const std::string& resolved_config_toml, const std::optional<fs::path>& resume_checkpoint,
                                   int world_size) {
  return {
      {"the world size", std::to_string(world_size)},
      {"the plugin", std::string(plugin.info().name) + " " + plugin.info().version + " (sha256 " + plugin.sha256() + ")"},
      {"the resume point", resume_text(resume_checkpoint)},
      {"data.train", file_text(config.data.train)},
      {"eval.data", file_text(config.eval.data)},
      {"tokenizer.path", file_text(config.tokenizer.path)},
      {kConfigAspect, config_text(resolved_config_toml)},
  };
}

void check_ranks_agree(dist::Communicator& communicator, const std::vector<RunAspect>& aspects) {
  if (communicator.world_size() == 1) return;
  const auto count = static_cast<int64_t>(aspects.size());
  at::Tensor fingerprints = at::empty({count}, at::kLong);
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t hash = sdk::fnv1a(aspects[static_cast<size_t>(i)].text);
    std::memcpy(fingerprints.data_ptr<int64_t>() + i, &hash, sizeof hash);
  }
  const at::Tensor by_rank = gather_rows(communicator, fingerprints);
  if (by_rank.eq(by_rank[0]).all().item<bool>()) return;

  // Some rank differs: every rank learns from whom and in what.
  const std::vector<std::string> rank0 = rank0_texts(communicator, aspects);
  const std::vector<std::string> accounts =
      gather_accounts(communicator, account_of_differences(aspects, rank0, communicator.rank()));
  std::string named;
  size_t differing = 0;
  for (const std::string& account : accounts) {
    if (account.empty()) continue;
    if (++differing <= kRanksNamed) named += (named.empty() ? "" : " | ") + account;
  }
  if (differing > kRanksNamed) named += " | and " + std::to_string(differing - kRanksNamed) + " more ranks";
  throw sdk::ConfigError("the ranks do not run the same thing, so every rank stops before the first step: " + named +
                         ". Every rank must get the same config (but output_dir), data, plugin and checkpoint");
}

}  // namespace ptrain::train
