// Bad or unsupported SentencePiece-style tokenizer.json files: each a
// ConfigError naming the file and the JSON key of the part that is wrong.
#include "catch.h"

#include "bad_inputs/rejection.h"
#include "support/run_command.h"

#include "core/tokenizer/hf_tokenizer.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

using namespace ptrain;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A tiny Mistral v0.3-style file: "▁a" is the one merge, bytes fall back.
json sentencepiece_file() {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}, {"\u2581", 3}, {"a", 4}, {"\u2581a", 5}};
  return {{"model",
           {{"type", "BPE"},
            {"vocab", vocab},
            {"merges", json::array({json::array({"\u2581", "a"})})},
            {"byte_fallback", true},
            {"fuse_unk", true},
            {"unk_token", "<unk>"}}},
          {"normalizer", nullptr},
          {"pre_tokenizer",
           {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}, {"split", false}}},
          {"decoder",
           {{"type", "Sequence"},
            {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                                      {{"type", "ByteFallback"}},
                                      {{"type", "Fuse"}},
                                      {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}}},
          {"added_tokens", json::array({{{"id", 1}, {"content", "<s>"}, {"special", true}}})}};
}

struct TokenizerCase {
  const char* name;
  std::function<void(json&)> spoil;
  std::string location;  // the key the message must name
};

std::unique_ptr<tokenizer::HfTokenizer> load_written(const fs::path& path, const json& file) {
  std::ofstream(path) << file.dump();
  return tokenizer::HfTokenizer::load(path);
}

}  // namespace

TEST_CASE("the tiny SentencePiece-style file the bad cases spoil is itself read", "[bad_inputs][tokenizer]") {
  const fs::path path = testing::fresh_test_dir("bad_tokenizer_base") / "tokenizer.json";
  const auto tokenizer = load_written(path, sentencepiece_file());
  // "a a" → "▁a▁a" (Metaspace) → two "▁a" merges; "é" is not in the vocabulary → unk, as there are no byte tokens.
  CHECK(tokenizer->encode("a a") == std::vector<int64_t>{5, 5});
  CHECK(tokenizer->encode("<s>a") == std::vector<int64_t>{1, 4});
  CHECK(tokenizer->encode("\xC3\xA9\xC3\xA9") == std::vector<int64_t>{3, 0});
  CHECK(tokenizer->decode({1, 5, 5}) == "a a");
}

TEST_CASE("unsupported or malformed SentencePiece tokenizer.json parts are refused naming the key",
          "[bad_inputs][tokenizer]") {
  const std::vector<TokenizerCase> cases = {
      {"Unigram model", [](json& t) { t["model"]["type"] = "Unigram"; }, "key 'model.type'"},
      {"no way to encode unknown characters",
       [](json& t) {
         t["model"]["byte_fallback"] = false;
         t["model"]["unk_token"] = nullptr;
       },
       "key 'model'"},
      {"unk_token not in the vocabulary", [](json& t) { t["model"]["unk_token"] = "<nope>"; }, "key 'model.unk_token'"},
      {"merge of unknown tokens",
       [](json& t) {
         t["model"]["merges"][0] = json::array({"a", "zz"});
       },
       "key 'model.merges[0]'"},
      {"dropout", [](json& t) { t["model"]["dropout"] = 0.1; }, "key 'model.dropout'"},
      {"continuing_subword_prefix", [](json& t) { t["model"]["continuing_subword_prefix"] = "##"; },
       "key 'model.continuing_subword_prefix'"},
      {"unknown prepend_scheme", [](json& t) { t["pre_tokenizer"]["prepend_scheme"] = "sometimes"; },
       "key 'pre_tokenizer.prepend_scheme'"},
      {"two-character replacement", [](json& t) { t["pre_tokenizer"]["replacement"] = "__"; },
       "key 'pre_tokenizer.replacement'"},
      {"Metaspace after another step",
       [](json& t) {
         const json metaspace = t["pre_tokenizer"];
         t["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array({{{"type", "Digits"}}, metaspace})}};
       },
       "key 'pre_tokenizer.pretokenizers[1]'"},
      {"Metaspace with ByteLevel",
       [](json& t) {
         const json metaspace = t["pre_tokenizer"];
         t["pre_tokenizer"] = {{"type", "Sequence"},
                               {"pretokenizers", json::array({metaspace, {{"type", "ByteLevel"}}})}};
       },
       "key 'pre_tokenizer'"},
      {"unknown normalizer",
       [](json& t) {
         t["normalizer"] = {{"type", "BertNormalizer"}};
       },
       "key 'normalizer'"},
      {"unknown decoder step",
       [](json& t) {
         t["decoder"]["decoders"][1] = {{"type", "CTC"}};
       },
       "key 'decoder.decoders[1]'"},
      {"Metaspace decoder",
       [](json& t) {
         t["decoder"] = {{"type", "Metaspace"}};
       },
       "key 'decoder'"},
      {"ByteLevel decoder without ByteLevel pre-tokenizer",
       [](json& t) {
         t["decoder"] = {{"type", "ByteLevel"}};
       },
       "key 'decoder'"},
      {"Strip of two characters", [](json& t) { t["decoder"]["decoders"][3]["content"] = "ab"; },
       "key 'decoder.decoders[3].content'"},
      {"negative Strip count", [](json& t) { t["decoder"]["decoders"][3]["start"] = -1; },
       "key 'decoder.decoders[3].start'"},
      {"Replace without content", [](json& t) { t["decoder"]["decoders"][0].erase("content"); },
       "key 'decoder.decoders[0].content'"},
  };
  const fs::path dir = testing::fresh_test_dir("bad_tokenizer");
  for (const TokenizerCase& c : cases) {
    INFO(c.name);
    json file = sentencepiece_file();
    c.spoil(file);
    const fs::path path = dir / "tokenizer.json";
    testing::check_rejected([&] { load_written(path, file); }, "ConfigError", path.string() + ": " + c.location);
  }
}

TEST_CASE("ptrain tokenize --decode refuses ids the tokenizer does not have, naming the line and entry",
          "[bad_inputs][tokenizer]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("bad_decode_ids");
  struct DecodeCase {
    const char* name;
    std::string ids;
    std::string message;
  };
  const std::vector<DecodeCase> cases = {
      {"a negative id", "[104, 105]\n[104, -1]\n",
       "stdin:2: id -1 (entry 1) is not a token id of this tokenizer, which has ids 0 to 258"},
      {"an id past the vocabulary", "[259]\n", "stdin:1: id 259 (entry 0) is not a token id of this tokenizer"},
      {"an id past int64", "[18446744073709551615]\n", "stdin:1: id 18446744073709551615 (entry 0) is not a token id"},
  };
  for (const DecodeCase& c : cases) {
    DYNAMIC_SECTION(c.name) {
      std::ofstream(dir / "ids.txt") << c.ids;
      const ptrain::testing::CommandResult result =
          ptrain::testing::run_ptrain("tokenize --tokenizer bytes --decode < " + (dir / "ids.txt").string() + " 2>&1");
      INFO(result.output);
      CHECK(result.exit_code != 0);
      CHECK_THAT(result.output, Catch::Contains(c.message));
    }
  }
}
