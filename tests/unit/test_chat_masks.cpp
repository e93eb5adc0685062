// Assistant-only loss masks follow the characters each token covers, for
// every kind of tokenizer: byte-level BPE, SentencePiece-style BPE with no
// pre-tokenizer (Llama 2, Mistral v0.1), with Metaspace (Mistral v0.3) or a
// Split step (Gemma 3), and the tokenizer.json ptrain writes into final/.
// The reference (tests/fixtures/tokenizers/chat_mask_reference.json, made by
// make_mask_reference.py) is transformers' apply_chat_template with
// return_assistant_tokens_mask: Hugging Face's tokenizers give each token's
// character offsets, and a token is trained when they overlap an assistant
// span of the rendered text.
#include "catch.h"
#include "json_fixture.h"

#include "core/tokenizer/byte_tokenizer_files.h"
#include "core/tokenizer/hf_tokenizer.h"
#include "core/tokenizer/jinja_chat_template.h"
#include "ptrain/sdk/chat.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

using namespace ptrain;
namespace fs = std::filesystem;
using nlohmann::json;

using ptrain::json_fixture::apply_variant;
using ptrain::json_fixture::messages_of;
using ptrain::json_fixture::read_json;

namespace {

const fs::path kFixtures = PTRAIN_TOKENIZER_FIXTURE_DIR;
const fs::path kExtracted = PTRAIN_TOKENIZER_EXTRACTED_DIR;

// The tokenizer a case names, loaded as a run would load it.
std::unique_ptr<tokenizer::HfTokenizer> load_tokenizer(const json& spec) {
  const std::string source = spec.at("source");
  if (source == "bytes_final") {
    return tokenizer::HfTokenizer::from_json(tokenizer::byte_tokenizer_json(), tokenizer::byte_tokenizer_config(),
                                             "final/tokenizer.json");
  }
  json tokenizer_json = read_json(kExtracted / source / "tokenizer.json");
  if (spec.contains("variant")) {
    for (const json& variant : read_json(kFixtures / "variants.json")) {
      if (variant.at("name") == spec.at("variant")) tokenizer_json = apply_variant(tokenizer_json, variant);
    }
  }
  return tokenizer::HfTokenizer::from_json(tokenizer_json, read_json(kExtracted / source / "tokenizer_config.json"),
                                           spec.at("name"));
}

}  // namespace

TEST_CASE("assistant-only masks follow each token's characters for every tokenizer kind", "[chat][tokenizer]") {
  const json cases = read_json(kFixtures / "chat_mask_cases.json");
  const json reference = read_json(kFixtures / "chat_mask_reference.json");
  std::map<std::string, std::unique_ptr<tokenizer::HfTokenizer>> tokenizers;
  for (const json& spec : cases.at("tokenizers")) tokenizers[spec.at("name")] = load_tokenizer(spec);

  size_t checked = 0;
  for (const json& expected : reference) {
    const std::string template_name = expected.at("template");
    const tokenizer::HfTokenizer& tokenizer = *tokenizers.at(expected.at("tokenizer"));
    const auto messages = messages_of(cases.at("conversations").at(expected.at("conversation").get<size_t>()));
    const auto ids = expected.at("ids").get<std::vector<int64_t>>();
    const auto mask = expected.at("mask").get<std::vector<uint8_t>>();
    INFO(expected.at("tokenizer") << " " << template_name << " conversation " << expected.at("conversation"));
    // The built-in template, and the same template as Jinja rendered by ptrain's engine ("auto").
    const sdk::ChatTemplate builtin = sdk::ChatTemplate::named(template_name);
    const sdk::ChatTemplate jinja = tokenizer::make_jinja_chat_template(
        {cases.at("templates").at(template_name), tokenizer.bos_text(), tokenizer.eos_text(), "chat_mask_cases.json"});
    for (const sdk::ChatTemplate* chat_template : {&builtin, &jinja}) {
      INFO((chat_template == &builtin ? "built-in" : "Jinja"));
      const std::vector<sdk::ChatSegment> segments = chat_template->render(messages, false, "x");
      CHECK(sdk::segments_to_text(segments, tokenizer.bos_text(), tokenizer.eos_text()) == expected.at("text"));
      const sdk::ChatTokens chat = sdk::tokenize_chat(tokenizer, segments);
      CHECK(chat.ids == ids);
      CHECK(chat.trainable == mask);
    }
    // Every case with assistant text trains something; the bug this guards
    // against left SentencePiece-style masks empty.
    CHECK(std::count(mask.begin(), mask.end(), 1) >= 1);
    ++checked;
  }
  CHECK(checked == 40);
}
