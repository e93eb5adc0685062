// Sharded model weights as transformers writes and reads them
// (model-00001-of-0000N.safetensors + model.safetensors.index.json): the
// split against huggingface_hub's rule worked by hand, a tiny model written
// with a tiny shard size and read back tensor-equal, the index JSON, and the
// max_shard_size spellings.
#include "catch.h"
#include "json_fixture.h"

#include "support/test_util.h"

#include "core/config/byte_size.h"
#include "core/model/causal_lm.h"
#include "core/model/safetensors.h"
#include "core/model/sharded_weights.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

using ptrain::json_fixture::read_json;

namespace {

using namespace ptrain;
namespace fs = std::filesystem;
using Plan = std::vector<std::vector<size_t>>;

std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

}  // namespace

TEST_CASE("shards split as huggingface_hub splits a state dict", "[model][shards]") {
  // Limit 10: 4+4 fit, 4 more would make 12 → new shard; 11 exceeds the limit
  // and gets a shard of its own, listed before the shard still being filled;
  // 6 fits beside 4; 5 would make 15 → new shard.
  CHECK(model::plan_weight_shards({4, 4, 4, 11, 6, 5}, 10) == Plan{{0, 1}, {3}, {2, 4}, {5}});
  CHECK(model::plan_weight_shards({10, 10}, 10) == Plan{{0}, {1}});   // exactly the limit fits
  CHECK(model::plan_weight_shards({3, 3, 3}, 0) == Plan{{0, 1, 2}});  // 0: never shard
  CHECK(model::plan_weight_shards({3, 3, 3}, 100) == Plan{{0, 1, 2}});
  CHECK(model::plan_weight_shards({}, 10) == Plan{{}});
  CHECK(model::weight_shard_name(0, 1) == "model.safetensors");
  CHECK(model::weight_shard_name(0, 3) == "model-00001-of-00003.safetensors");
  CHECK(model::weight_shard_name(2, 3) == "model-00003-of-00003.safetensors");
}

TEST_CASE("a model above max_shard_bytes is written in shards with an index, and reads back tensor-equal",
          "[model][shards]") {
  testing::TempDir dir("ptrain_shards_test");
  auto model = model::CausalLm::init_random(testing::tiny_model_config(), 3);
  const auto parameters = model->named_parameters();
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    INFO(c10::toString(dtype));
    const fs::path out = dir.path() / c10::toString(dtype);
    // Each of embed_tokens and lm_head ([272, 32]) is larger than the limit.
    const int64_t embed_bytes = 272 * 32 * c10::elementSize(dtype);
    const int64_t limit = embed_bytes - 1;
    model::CausalLm::SaveOptions options;
    options.max_shard_bytes = limit;
    model->save_hf_dir(out, dtype, options);

    // The index, as transformers writes it: total bytes of all tensors, every tensor's file.
    const nlohmann::json index = read_json(out / "model.safetensors.index.json");
    int64_t total = 0;
    for (const auto& [name, t] : parameters) total += t.numel() * c10::elementSize(dtype);
    CHECK(index.at("metadata").at("total_size") == total);
    const nlohmann::json& weight_map = index.at("weight_map");
    CHECK(weight_map.size() == parameters.size());

    std::vector<int64_t> sizes;
    for (const auto& [name, t] : parameters) sizes.push_back(t.numel() * c10::elementSize(dtype));
    const Plan plan = model::plan_weight_shards(sizes, limit);
    REQUIRE(plan.size() >= 3);  // embed alone, lm_head alone, the rest
    std::set<std::string> expected_files{"config.json", "model.safetensors.index.json"};
    for (size_t s = 0; s < plan.size(); ++s) {
      char file_name[64];
      std::snprintf(file_name, sizeof file_name, "model-%05zu-of-%05zu.safetensors", s + 1, plan.size());
      const std::string file = file_name;
      expected_files.insert(file);
      // Each shard holds exactly the tensors the index maps to it, in its limit.
      const auto stored = model::read_safetensors(out / file);
      REQUIRE(stored.size() == plan[s].size());
      int64_t shard_bytes = 0;
      for (size_t k = 0; k < stored.size(); ++k) {
        const auto& [name, tensor] = parameters[plan[s][k]];
        CHECK(stored[k].first == name);
        CHECK(weight_map.at(name) == file);
        CHECK(stored[k].second.scalar_type() == dtype);
        CHECK(at::equal(stored[k].second, tensor.detach().to(dtype)));
        shard_bytes += sizes[plan[s][k]];
      }
      if (plan[s].size() > 1) CHECK(shard_bytes <= limit);
    }
    CHECK(files_in(out) == expected_files);  // no model.safetensors beside the shards

    const auto loaded = model::CausalLm::load_hf_dir(out);
    CHECK(loaded->stored_dtype() == dtype);
    const auto reloaded = loaded->named_parameters();
    REQUIRE(reloaded.size() == parameters.size());
    for (size_t i = 0; i < parameters.size(); ++i) {
      INFO(parameters[i].first);
      CHECK(reloaded[i].first == parameters[i].first);
      CHECK(at::equal(reloaded[i].second.detach(), parameters[i].second.detach().to(dtype).to(at::kFloat)));
    }
  }
}

TEST_CASE("below max_shard_bytes the weights stay one model.safetensors, with config.json's extra fields",
          "[model][shards]") {
  testing::TempDir dir("ptrain_shards_test");
  auto model = model::CausalLm::init_random(testing::tiny_model_config(), 4);
  model::CausalLm::SaveOptions options;
  options.max_shard_bytes = 5'000'000'000;
  options.config_fields = {{"bos_token_id", nullptr}, {"eos_token_id", 257}};
  model->save_hf_dir(dir.path(), at::kFloat, options);
  CHECK(files_in(dir.path()) == std::set<std::string>{"config.json", "model.safetensors"});
  const nlohmann::json config = read_json(dir.path() / "config.json");
  CHECK(config.at("bos_token_id").is_null());
  CHECK(config.at("eos_token_id") == 257);
  CHECK(config.at("torch_dtype") == "float32");
  CHECK(config.at("model_type") == "qwen2");
}

TEST_CASE("max_shard_size spellings: transformers' units, powers of 1000 and of 1024", "[config][shards]") {
  using config::parse_byte_size;
  CHECK(parse_byte_size("5GB") == int64_t{5'000'000'000});
  CHECK(parse_byte_size("5gb") == int64_t{5'000'000'000});
  CHECK(parse_byte_size("500MB") == int64_t{500'000'000});
  CHECK(parse_byte_size("2GiB") == (int64_t{2} << 30));
  CHECK(parse_byte_size("64KiB") == (int64_t{64} << 10));
  CHECK(parse_byte_size("3 MiB") == (int64_t{3} << 20));
  CHECK(parse_byte_size("1TB") == int64_t{1'000'000'000'000});
  CHECK(parse_byte_size("100B") == int64_t{100});
  for (const char* bad :
       {"", "5", "GB", "1.5GB", "0GB", "-1GB", "5XB", "5 G B", "5GB ", "99999999999999999999B", "9999999999TiB"}) {
    INFO(bad);
    CHECK_FALSE(parse_byte_size(bad).has_value());
  }
}
