// The Hugging Face files ptrain writes for a byte-tokenizer model tokenize as
// the byte tokenizer does: Hugging Face's own tokenizers read
// tests/fixtures/byte_tokenizer/tokenizer.json and gave the ids and
// decodings of reference.json (make_reference.sh, @huggingface/tokenizers);
// the first test keeps that file equal to what byte_tokenizer_json() writes.
#include "catch.h"
#include "json_fixture.h"

#include "core/tokenizer/byte_tokenizer.h"
#include "core/tokenizer/byte_tokenizer_files.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

using ptrain::json_fixture::read_json;

namespace {

using namespace ptrain;
using nlohmann::json;
namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(PTRAIN_TOKENIZER_FIXTURE_DIR).parent_path() / "byte_tokenizer";

// ByteTokenizer::encode of each piece between the texts "<bos>", "<eos>",
// "<pad>", and those texts as the special ids.
std::vector<int64_t> byte_ids_reading_special_texts(const tokenizer::ByteTokenizer& bytes, const std::string& text) {
  const std::pair<const char*, int64_t> specials[] = {{"<bos>", tokenizer::ByteTokenizer::kBos},
                                                      {"<eos>", tokenizer::ByteTokenizer::kEos},
                                                      {"<pad>", tokenizer::ByteTokenizer::kPad}};
  std::vector<int64_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    size_t next = std::string::npos;
    int64_t special = -1;
    for (const auto& [name, id] : specials) {
      const size_t at = text.find(name, start);
      if (at < next) {
        next = at;
        special = id;
      }
    }
    const std::vector<int64_t> piece = bytes.encode(text.substr(start, next - start));
    ids.insert(ids.end(), piece.begin(), piece.end());
    if (next == std::string::npos) break;
    ids.push_back(special);
    start = next + 5;  // each special text has 5 characters
  }
  return ids;
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
  int64_t with_special_texts = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = corpus[i];
    INFO("corpus[" << i << "]");
    const std::vector<int64_t> expected = reference.at("ids")[i];
    // The byte tokenizer's ids, except that Hugging Face reads the texts
    // "<bos>", "<eos>", "<pad>" as those special tokens (byte_tokenizer_files.h).
    CHECK(expected == byte_ids_reading_special_texts(bytes, text));
    if (expected == bytes.encode(text)) {
      CHECK(bytes.decode(expected) == text);
    } else {
      ++with_special_texts;
    }
    CHECK(bytes.decode(expected) == reference.at("decoded")[i].get<std::string>());  // specials skipped
  }
  CHECK(with_special_texts >= 1);  // the corpus spells special tokens, so both readings are exercised
  using tokenizer::ByteTokenizer;
  CHECK(reference.at("specials") == json{ByteTokenizer::kBos, 'h', 'i', ByteTokenizer::kEos, ByteTokenizer::kPad});
}
