// The Hugging Face files ptrain writes for a byte-tokenizer model tokenize as
// the byte tokenizer does: Hugging Face's own tokenizers read
// tests/fixtures/byte_tokenizer/tokenizer.json and gave the ids and
// decodings of reference.json (make_reference.sh, @huggingface/tokenizers);
// the first test keeps that file equal to what byte_tokenizer_json() writes.
#include "catch.h"

#include "core/tokenizer/byte_tokenizer.h"
#include "core/tokenizer/byte_tokenizer_files.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace {

using namespace ptrain;
using nlohmann::json;
namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(PTRAIN_TOKENIZER_FIXTURE_DIR).parent_path() / "byte_tokenizer";

json read_json(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE(in);
  return json::parse(in);
}

}  // namespace

TEST_CASE("byte_tokenizer_json writes the tokenizer.json the reference was made from", "[tokenizer][byte_files]") {
  CHECK(json(tokenizer::byte_tokenizer_json()) == read_json(kFixtures / "tokenizer.json"));
  const json config = tokenizer::byte_tokenizer_config();
  CHECK(config.at("tokenizer_class") == "PreTrainedTokenizerFast");
  CHECK(config.at("bos_token") == "<bos>");
  CHECK(config.at("eos_token") == "<eos>");
  CHECK(config.at("pad_token") == "<pad>");
}

TEST_CASE("Hugging Face's tokenizers give the byte tokenizer's ids with the written tokenizer.json",
          "[tokenizer][byte_files]") {
  const json reference = read_json(kFixtures / "reference.json");
  const json corpus = read_json(fs::path(PTRAIN_TOKENIZER_FIXTURE_DIR) / "corpus.json");
  REQUIRE(reference.at("ids").size() == corpus.size());
  const tokenizer::ByteTokenizer bytes;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = corpus[i];
    INFO("corpus[" << i << "]");
    const std::vector<int64_t> ids = bytes.encode(text);
    CHECK(ids == reference.at("ids")[i].get<std::vector<int64_t>>());
    CHECK(bytes.decode(ids) == reference.at("decoded")[i].get<std::string>());
  }
  // The special tokens' texts are read as the byte tokenizer's special ids.
  using tokenizer::ByteTokenizer;
  CHECK(reference.at("specials") == json{ByteTokenizer::kBos, 'h', 'i', ByteTokenizer::kEos, ByteTokenizer::kPad});
}
