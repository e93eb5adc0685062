// final/ and every checkpoint's model are complete Hugging Face directories
// (docs/file-formats.md#model-directories): a run with Qwen3's tokenizer.json writes config.json with
// bos/eos ids, the input's generation_config.json merged with the
// tokenizer's ids, tokenizer.json and special_tokens_map.json as they were,
// tokenizer_config.json with the chat template the run used, and weights
// sharded above checkpoint.max_shard_size. The written tokenizer loads back
// giving the same ids; the weights load back equal to the checkpoint's. A
// byte-tokenizer run writes that tokenizer's Hugging Face equivalent.
#include "catch.h"

#include "support/run_command.h"
#include "support/test_util.h"

#include "core/model/causal_lm.h"
#include "core/model/safetensors.h"
#include "core/tokenizer/byte_tokenizer.h"
#include "core/tokenizer/byte_tokenizer_files.h"
#include "core/tokenizer/chat_template_jinja.h"
#include "core/tokenizer/hf_tokenizer.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>

namespace fs = std::filesystem;
using nlohmann::json;
using ptrain::testing::CommandResult;
using ptrain::testing::run_ptrain;

namespace {

const fs::path kExtracted = PTRAIN_TOKENIZER_EXTRACTED_DIR;
const fs::path kFixtures = PTRAIN_TOKENIZER_FIXTURE_DIR;

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

json read_json(const fs::path& path) { return json::parse(read_bytes(path)); }

void write_bytes(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

// Qwen3's tokenizer files plus a special_tokens_map.json, and a tiny model of
// Qwen3's vocabulary with the generation_config.json Qwen3 ships (its eos is
// a list, its sampling defaults must survive).
struct Inputs {
  fs::path tokenizer_dir;
  fs::path model_dir;
};

const json kSpecialTokensMap = {{"eos_token", "<|im_end|>"}, {"pad_token", "<|endoftext|>"}};
const json kInputGenerationConfig = {
    {"do_sample", true}, {"eos_token_id", {151645, 151643}}, {"temperature", 0.6}, {"top_k", 20}};

Inputs write_inputs(const fs::path& dir) {
  Inputs inputs{dir / "tokenizer", dir / "init_model"};
  fs::create_directories(inputs.tokenizer_dir);
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
    fs::copy_file(kExtracted / "qwen3" / name, inputs.tokenizer_dir / name);
  }
  write_bytes(inputs.tokenizer_dir / "special_tokens_map.json", kSpecialTokensMap.dump(2));
  ptrain::model::ModelConfig config = ptrain::testing::tiny_model_config();
  config.vocab_size = 151669;  // Qwen3's ids, added tokens included
  config.num_layers = 1;
  ptrain::model::CausalLm::init_random(config, 9)->save_hf_dir(inputs.model_dir);
  write_bytes(inputs.model_dir / "generation_config.json", kInputGenerationConfig.dump(2));
  return inputs;
}

fs::path write_chat_data(const fs::path& dir) {
  const fs::path path = dir / "chat.jsonl";
  std::ofstream out(path);
  const std::vector<std::pair<std::string, std::string>> turns = {
      {"What is 2+2?", "4"}, {"Name a colour.", "Blue."}, {"Say nothing.", ""}, {"Hi!", "Hello! How can I help?"}};
  for (const auto& [user, assistant] : turns) {
    out << json{{"messages", {{{"role", "user"}, {"content", user}}, {{"role", "assistant"}, {"content", assistant}}}}}
               .dump()
        << "\n";
  }
  return path;
}

fs::path write_config(const fs::path& dir, const std::string& name, const Inputs& inputs,
                      const std::string& chat_template, const std::string& max_shard_size) {
  const fs::path path = dir / (name + ".toml");
  std::ofstream(path) << "plugin = \"sft\"\nseed = 1\noutput_dir = \"" << (dir / name).string() << "\"\n"
                      << "[model]\ninit = \"" << inputs.model_dir.string() << "\"\n"
                      << "[tokenizer]\npath = \"" << (inputs.tokenizer_dir / "tokenizer.json").string()
                      << "\"\nchat_template = \"" << chat_template << "\"\n"
                      << "[data]\ntrain = \"" << write_chat_data(dir).string() << "\"\nmax_length = 48\n"
                      << "[batch]\nglobal_size = 4\n"
                      << "[optim]\nlr = 1e-3\n"
                      << "[train]\nmax_steps = 2\n"
                      << "[checkpoint]\nevery_steps = 1\nmax_shard_size = \"" << max_shard_size << "\"\n"
                      << "[runtime]\nthreads = 1\n";
  return path;
}

// What both final/ and checkpoints/step_2/ must hold besides the weights.
void check_served_files(const fs::path& model_dir, const Inputs& inputs, const json& expected_tokenizer_config,
                        const ptrain::sdk::ChatTemplate& used) {
  INFO(model_dir.string());
  const json config = read_json(model_dir / "config.json");
  CHECK(config.at("bos_token_id").is_null());  // Qwen3's tokenizer has no bos token
  CHECK(config.at("eos_token_id") == 151645);  // <|im_end|>
  CHECK(config.at("vocab_size") == 151669);

  // The input's settings kept (its eos list too); the ids it lacked added.
  json expected_generation = kInputGenerationConfig;
  expected_generation["pad_token_id"] = 151643;  // <|endoftext|>
  CHECK(read_json(model_dir / "generation_config.json") == expected_generation);

  CHECK(read_bytes(model_dir / "tokenizer.json") == read_bytes(inputs.tokenizer_dir / "tokenizer.json"));
  CHECK(read_bytes(model_dir / "special_tokens_map.json") ==
        read_bytes(inputs.tokenizer_dir / "special_tokens_map.json"));
  CHECK(read_json(model_dir / "tokenizer_config.json") == expected_tokenizer_config);

  // The written tokenizer is the one the run used: the same ids for every text.
  const auto original = ptrain::tokenizer::HfTokenizer::load(inputs.tokenizer_dir / "tokenizer.json");
  const auto written = ptrain::tokenizer::HfTokenizer::load(model_dir / "tokenizer.json");
  CHECK(written->eos_id() == original->eos_id());
  CHECK(written->bos_id() == original->bos_id());
  CHECK(written->pad_id() == original->pad_id());
  // Its chat template (rendered by ptrain's Jinja engine) gives the text the run trained on.
  const std::optional<ptrain::sdk::ChatTemplate> written_template = written->own_chat_template();
  REQUIRE(written_template.has_value());
  const std::vector<ptrain::sdk::ChatMessage> conversation = {
      {"system", "Be brief."}, {"user", "2+2?"}, {"assistant", "4"}, {"user", "And 3+3?"}, {"assistant", ""}};
  for (const bool generation_prompt : {false, true}) {
    CHECK(ptrain::sdk::segments_to_text(written_template->render(conversation, generation_prompt, "test"), "", "") ==
          ptrain::sdk::segments_to_text(used.render(conversation, generation_prompt, "test"), "", ""));
  }
  for (const json& text : read_json(kFixtures / "corpus.json")) {
    CHECK(written->encode(text.get<std::string>()) == original->encode(text.get<std::string>()));
  }
}

}  // namespace

TEST_CASE("final/ and checkpoints are complete model directories: tokenizer, template, generation config, shards",
          "[e2e][model_dir]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("model_dir_files");
  const Inputs inputs = write_inputs(dir);
  const json input_tokenizer_config = read_json(inputs.tokenizer_dir / "tokenizer_config.json");
  // "auto" renders with Qwen3's own template.
  const std::optional<ptrain::sdk::ChatTemplate> own_template =
      ptrain::tokenizer::HfTokenizer::load(inputs.tokenizer_dir / "tokenizer.json")->own_chat_template();
  REQUIRE(own_template.has_value());

  SECTION("chat_template = \"auto\": the input's own template, weights sharded") {
    // embed_tokens and lm_head are 151669 x 32 float32 (19.4 MB) each: each gets a shard.
    const CommandResult result = run_ptrain("train -c " + write_config(dir, "auto", inputs, "auto", "4MB").string());
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    for (const fs::path& model_dir : {dir / "auto" / "final", dir / "auto" / "checkpoints" / "step_2"}) {
      check_served_files(model_dir, inputs, input_tokenizer_config, *own_template);

      const json index = read_json(model_dir / "model.safetensors.index.json");
      std::set<std::string> shards;
      int64_t total_size = 0;
      for (const auto& [name, file] : index.at("weight_map").items()) shards.insert(file.get<std::string>());
      for (const std::string& shard : shards) {
        for (const auto& [name, tensor] : ptrain::model::read_safetensors(model_dir / shard)) {
          CHECK(index.at("weight_map").at(name) == shard);
          total_size += tensor.numel() * tensor.element_size();
        }
      }
      CHECK(shards.size() == 3);
      CHECK(shards.count("model-00001-of-00003.safetensors") == 1);
      CHECK(index.at("metadata").at("total_size") == total_size);
      CHECK_FALSE(fs::exists(model_dir / "model.safetensors"));
    }
    const std::set<std::string> expected{"config.json",
                                         "generation_config.json",
                                         "model-00001-of-00003.safetensors",
                                         "model-00002-of-00003.safetensors",
                                         "model-00003-of-00003.safetensors",
                                         "model.safetensors.index.json",
                                         "special_tokens_map.json",
                                         "tokenizer.json",
                                         "tokenizer_config.json"};
    CHECK(files_in(dir / "auto" / "final") == expected);

    // final/ (float32, as the input was stored) loads back equal to the last checkpoint's weights.
    const auto final_model = ptrain::model::CausalLm::load_hf_dir(dir / "auto" / "final");
    const auto checkpoint_model = ptrain::model::CausalLm::load_hf_dir(dir / "auto" / "checkpoints" / "step_2");
    const auto final_weights = final_model->named_parameters();
    const auto checkpoint_weights = checkpoint_model->named_parameters();
    REQUIRE(final_weights.size() == checkpoint_weights.size());
    for (size_t i = 0; i < final_weights.size(); ++i) {
      INFO(final_weights[i].first);
      CHECK(at::equal(final_weights[i].second, checkpoint_weights[i].second));
    }
    // ... and differs from the initial model: it was trained.
    const auto initial = ptrain::model::CausalLm::load_hf_dir(inputs.model_dir);
    CHECK_FALSE(at::equal(initial->named_parameters()[1].second, final_weights[1].second));

    // The checkpoint resumes from its sharded weights.
    const CommandResult resumed =
        run_ptrain("train -c " + (dir / "auto.toml").string() + " --resume auto --set train.max_steps=3");
    INFO(resumed.output);
    CHECK(resumed.exit_code == 0);
  }

  SECTION("chat_template = \"chatml\": the named template written as Jinja, weights in one file") {
    const CommandResult result =
        run_ptrain("train -c " + write_config(dir, "chatml", inputs, "chatml", "5GB").string());
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    const fs::path final_dir = dir / "chatml" / "final";
    json expected = input_tokenizer_config;
    expected["chat_template"] = read_json(final_dir / "tokenizer_config.json").at("chat_template");
    check_served_files(final_dir, inputs, expected, ptrain::sdk::ChatTemplate::named("chatml"));
    const std::string jinja = expected.at("chat_template").get<std::string>();
    CHECK(jinja.rfind("{#- ptrain's \"chatml\" chat template written as Jinja", 0) == 0);
    CHECK(jinja != input_tokenizer_config.at("chat_template").get<std::string>());
    CHECK(fs::exists(final_dir / "model.safetensors"));
    CHECK_FALSE(fs::exists(final_dir / "model.safetensors.index.json"));
  }
}

TEST_CASE("with the byte tokenizer final/ holds its Hugging Face equivalent, ids and chat template",
          "[e2e][model_dir]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("model_dir_bytes");
  const fs::path config = dir / "bytes.toml";
  std::ofstream(config) << "plugin = \"sft\"\nseed = 1\noutput_dir = \"" << (dir / "bytes").string() << "\"\n"
                        << "[model]\nvocab_size = 259\nhidden_size = 32\nintermediate_size = 64\nnum_layers = 1\n"
                        << "num_heads = 2\nnum_kv_heads = 1\nmax_position_embeddings = 32\n"
                        << "[tokenizer]\nchat_template = \"llama3\"\n"
                        << "[data]\ntrain = \"" << PTRAIN_SOURCE_DIR << "/data/arith/train.jsonl\"\nmax_length = 16\n"
                        << "[batch]\nglobal_size = 8\n"
                        << "[train]\nmax_steps = 1\n"
                        << "[runtime]\nthreads = 1\n";
  const CommandResult result = run_ptrain("train -c " + config.string());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  const fs::path final_dir = dir / "bytes" / "final";
  CHECK(files_in(final_dir) == std::set<std::string>{"config.json", "generation_config.json", "model.safetensors",
                                                     "tokenizer.json", "tokenizer_config.json"});
  const json config_json = read_json(final_dir / "config.json");
  CHECK(config_json.at("bos_token_id") == 256);
  CHECK(config_json.at("eos_token_id") == 257);
  CHECK(config_json.at("torch_dtype") == "float32");
  CHECK(read_json(final_dir / "generation_config.json") ==
        json{{"bos_token_id", 256}, {"eos_token_id", 257}, {"pad_token_id", 258}});
  // The files Hugging Face's tokenizers were checked against (tests/unit/test_byte_tokenizer_files.cpp).
  CHECK(read_json(final_dir / "tokenizer.json") == json(ptrain::tokenizer::byte_tokenizer_json()));
  json expected_config = ptrain::tokenizer::byte_tokenizer_config();
  expected_config["chat_template"] = ptrain::tokenizer::chat_template_jinja(ptrain::sdk::ChatTemplate::named("llama3"));
  CHECK(read_json(final_dir / "tokenizer_config.json") == expected_config);

  // ... and ptrain loads them back as a tokenizer.json giving the ids Hugging
  // Face gives (tests/fixtures/byte_tokenizer/reference.json): the byte
  // tokenizer's, with "<bos>", "<eos>", "<pad>" texts read as special tokens.
  const auto written = ptrain::tokenizer::HfTokenizer::load(final_dir / "tokenizer.json");
  const ptrain::tokenizer::ByteTokenizer bytes;
  CHECK(written->bos_id() == bytes.bos_id());
  CHECK(written->eos_id() == bytes.eos_id());
  CHECK(written->pad_id() == bytes.pad_id());
  const json corpus = read_json(kFixtures / "corpus.json");
  const json reference = read_json(kFixtures.parent_path() / "byte_tokenizer" / "reference.json");
  REQUIRE(reference.at("ids").size() == corpus.size());
  for (size_t i = 0; i < corpus.size(); ++i) {
    INFO("corpus[" << i << "]");
    CHECK(written->encode(corpus[i].get<std::string>()) == reference.at("ids")[i].get<std::vector<int64_t>>());
  }
}
