// Chat data: template rendering against Hugging Face's Jinja output
// (tests/fixtures/tokenizers/reference.json), assistant-only loss masks on
// multi-turn conversations, custom templates from TOML, errors, SFT on chat
// examples, and the dataset tokenization cache.
#include "catch.h"
#include "json_fixture.h"

#include "support/run_command.h"
#include "support/test_util.h"

#include "core/config/config_loader.h"
#include "core/tokenizer/byte_tokenizer.h"
#include "core/tokenizer/hf_tokenizer.h"
#include "core/train/run_setup.h"
#include "ptrain/sdk/chat.h"
#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/token_cache.h"
#include "sft_loss.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <unistd.h>
#include <atomic>
#include <filesystem>
#include <fstream>

using namespace ptrain;
namespace fs = std::filesystem;
using nlohmann::json;

using ptrain::testing::error_of;

using ptrain::json_fixture::messages_of;
using ptrain::json_fixture::read_json;

namespace {

const fs::path kFixtures = PTRAIN_TOKENIZER_FIXTURE_DIR;
const fs::path kExtracted = PTRAIN_TOKENIZER_EXTRACTED_DIR;

// The ids of each maximal run of trainable positions.
std::vector<std::vector<int64_t>> trainable_runs(const sdk::ChatTokens& chat) {
  std::vector<std::vector<int64_t>> runs;
  for (size_t i = 0; i < chat.ids.size(); ++i) {
    if (!chat.trainable[i]) continue;
    if (i == 0 || !chat.trainable[i - 1]) runs.emplace_back();
    runs.back().push_back(chat.ids[i]);
  }
  return runs;
}

}  // namespace

TEST_CASE("chat templates: chatml and llama3 render as Hugging Face's Jinja templates do", "[chat]") {
  const json reference = read_json(kFixtures / "reference.json").at("chat");
  const json cases = read_json(kFixtures / "chat_cases.json");
  for (const std::string name : {"chatml", "llama3"}) {
    const sdk::ChatTemplate chat_template = sdk::ChatTemplate::named(name);
    for (size_t i = 0; i < cases.size(); ++i) {
      INFO(name << " " << cases[i].at("name"));
      const auto messages = messages_of(cases[i].at("messages"));
      const json& expected = reference.at(name)[i];
      CHECK(sdk::segments_to_text(chat_template.render(messages, false, "x"), "<|begin_of_text|>") ==
            expected.at("text"));
      CHECK(sdk::segments_to_text(chat_template.render(messages, true, "x"), "<|begin_of_text|>") ==
            expected.at("generation_prompt_text"));
    }
  }
}

TEST_CASE("chat templates: rendered ChatML tokenizes to Hugging Face's ids for the whole text", "[chat]") {
  const json reference = read_json(kFixtures / "reference.json").at("chat").at("chatml");
  const json cases = read_json(kFixtures / "chat_cases.json");
  const auto qwen = tokenizer::HfTokenizer::load(kExtracted / "qwen3" / "tokenizer.json");
  const sdk::ChatTemplate chatml = sdk::ChatTemplate::named("chatml");
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO(cases[i].at("name"));
    const sdk::ChatTokens chat =
        sdk::tokenize_chat(*qwen, chatml.render(messages_of(cases[i].at("messages")), false, "x"));
    CHECK(chat.ids == reference[i].at("qwen3_ids").get<std::vector<int64_t>>());
    CHECK(chat.trainable.size() == chat.ids.size());
  }
}

TEST_CASE("chat templates: the plain template with the byte tokenizer", "[chat]") {
  const sdk::ChatTemplate plain = sdk::ChatTemplate::named("plain");
  const std::vector<sdk::ChatMessage> messages = {
      {"system", "Be brief."}, {"user", "2+2?"}, {"assistant", "4"}, {"user", "3+3?"}, {"assistant", "6"}};
  CHECK(sdk::segments_to_text(plain.render(messages, false, "x"), "<bos>", "<eos>") ==
        "<bos>System: Be brief.\n\nUser: 2+2?\nAssistant: 4<eos>User: 3+3?\nAssistant: 6<eos>");
  CHECK(sdk::segments_to_text(plain.render({messages[1]}, true, "x"), "<bos>", "<eos>") ==
        "<bos>User: 2+2?\nAssistant: ");

  const tokenizer::ByteTokenizer bytes;
  const sdk::ChatTokens chat = sdk::tokenize_chat(bytes, plain.render(messages, false, "x"));
  CHECK(chat.ids.front() == tokenizer::ByteTokenizer::kBos);
  // Trained: "4" <eos> and "6" <eos>, nothing else.
  CHECK(trainable_runs(chat) == std::vector<std::vector<int64_t>>{{'4', tokenizer::ByteTokenizer::kEos},
                                                                  {'6', tokenizer::ByteTokenizer::kEos}});
}

TEST_CASE("assistant-only masks cover each assistant turn and its end-of-turn token, over several turns", "[chat]") {
  // ChatML with Qwen3's tokenizer; Llama 3 with cl100k plus Llama 3's special
  // tokens (Llama 3's vocabulary is cl100k's with more merges and these specials).
  const auto qwen = tokenizer::HfTokenizer::load(kExtracted / "qwen3" / "tokenizer.json");
  json llama_json = read_json(kExtracted / "cl100k" / "tokenizer.json");
  int64_t next_id = 100300;
  for (const char* special : {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}) {
    llama_json["added_tokens"].push_back({{"id", next_id++},
                                          {"content", special},
                                          {"single_word", false},
                                          {"lstrip", false},
                                          {"rstrip", false},
                                          {"normalized", false},
                                          {"special", true}});
  }
  const auto llama = tokenizer::HfTokenizer::from_json(
      llama_json, {{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"}}, "llama3-like");

  const std::vector<sdk::ChatMessage> messages = {{"system", "You are helpful."},
                                                  {"user", "Hi!"},
                                                  {"assistant", "Hello! How can I help?"},
                                                  {"user", "Write a haiku."},
                                                  {"assistant", "Soft rain on the roof\nwhispers"}};
  struct Case {
    std::string name;
    const sdk::Tokenizer* tokenizer;
    std::string end_of_turn;
  };
  for (const Case& c : {Case{"chatml", qwen.get(), "<|im_end|>"}, Case{"llama3", llama.get(), "<|eot_id|>"}}) {
    INFO(c.name);
    const int64_t end_of_turn = *c.tokenizer->token_id(c.end_of_turn);
    const auto expected_run = [&](const std::string& content) {
      std::vector<int64_t> ids = c.tokenizer->encode(content);
      ids.push_back(end_of_turn);
      return ids;
    };
    const sdk::ChatTokens chat =
        sdk::tokenize_chat(*c.tokenizer, sdk::ChatTemplate::named(c.name).render(messages, false, "x"));
    const std::vector<std::vector<int64_t>> runs = trainable_runs(chat);
    REQUIRE(runs.size() == 2);
    CHECK(runs[0] == expected_run("Hello! How can I help?"));
    CHECK(runs[1] == expected_run("Soft rain on the roof\nwhispers"));
    // Everything else — system and user turns, role headers, separators — is context only.
    const int64_t trained = std::count(chat.trainable.begin(), chat.trainable.end(), 1);
    CHECK(trained == static_cast<int64_t>(runs[0].size() + runs[1].size()));
    CHECK(chat.ids.size() > static_cast<size_t>(trained) + 10);
  }
}

TEST_CASE("SFT on chat data: assistant-only masks, full-conversation loss, and truncation that leaves nothing",
          "[chat]") {
  const tokenizer::ByteTokenizer bytes;
  const sdk::ChatTemplate plain = sdk::ChatTemplate::named("plain");
  const std::vector<sdk::ChatMessage> messages = {{"user", "ab"}, {"assistant", "cd"}};
  // <bos> "User: ab\nAssistant: " c d <eos>
  const sft::TokenizedExample only = sft::tokenize_chat_example(bytes, plain, messages, true, 64, "x:1");
  const size_t length = only.tokens.size();
  CHECK(length == 1 + 9 + 11 + 3);
  const sdk::TokenBatch batch = sft::collate_examples({only}, bytes.pad_id());
  // Targets are tokens[1:]; the last three (c, d, <eos>) are trained.
  CHECK(batch.loss_mask.sum().item<int64_t>() == 3);
  CHECK(batch.loss_mask[0].slice(0, 0, length - 4).sum().item<int64_t>() == 0);

  const sft::TokenizedExample all = sft::tokenize_chat_example(bytes, plain, messages, false, 64, "x:1");
  CHECK(sft::collate_examples({all}, bytes.pad_id()).loss_mask.sum().item<int64_t>() ==
        static_cast<int64_t>(length - 1));

  // Cut inside the user turn: no trainable target survives; the plugin skips such examples.
  const sft::TokenizedExample cut = sft::tokenize_chat_example(bytes, plain, messages, true, 12, "x:1");
  CHECK(cut.truncated);
  CHECK_FALSE(cut.has_trainable_target());
  CHECK(only.has_trainable_target());
  // Prompt/completion data is unchanged: <bos> prompt completion <eos>.
  const sft::TokenizedExample pc = sft::tokenize_example(bytes, "ab", "cd", 64);
  CHECK(pc.tokens == std::vector<int64_t>{256, 'a', 'b', 'c', 'd', 257});
  CHECK(pc.trainable == std::vector<uint8_t>{0, 0, 0, 1, 1, 1});
}

TEST_CASE("chat errors: unknown template, unknown role, malformed messages, {bos} without a bos token", "[chat]") {
  CHECK_THAT(error_of([] { sdk::ChatTemplate::named("vicuna"); }),
             Catch::Contains("unknown chat template 'vicuna'") && Catch::Contains("chatml, llama3, plain"));
  const sdk::ChatTemplate chatml = sdk::ChatTemplate::named("chatml");
  CHECK_THAT(error_of([&] {
               chatml.render({{"user", "hi"}, {"tool", "42"}}, false, "data.jsonl:7");
             }),
             Catch::Contains("data.jsonl:7") && Catch::Contains("messages[1].role") &&
                 Catch::Contains("unknown role \"tool\""));

  sdk::Example example;
  example.location = "data.jsonl:3";
  example.fields = json::parse(R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant"}]})");
  CHECK_THAT(error_of([&] { sdk::read_messages(example); }), Catch::Contains("data.jsonl:3") &&
                                                                 Catch::Contains("messages[1]") &&
                                                                 Catch::Contains("missing key 'content'"));
  example.fields = json::parse(R"({"messages": "hi"})");
  CHECK_THAT(error_of([&] { sdk::read_messages(example); }), Catch::Contains("expected an array"));
  example.fields = json::parse(R"({"messages": [{"role": 1, "content": "x"}]})");
  CHECK_THAT(error_of([&] { sdk::read_messages(example); }), Catch::Contains("messages[0].role': expected a string"));

  const auto qwen = tokenizer::HfTokenizer::load(kExtracted / "qwen3" / "tokenizer.json");
  const sdk::ChatTemplate llama3 = sdk::ChatTemplate::named("llama3");  // begins with {bos}; Qwen has none
  CHECK_THAT(error_of([&] {
               sdk::tokenize_chat(*qwen, llama3.render({{"user", "hi"}}, false, "x"));
             }),
             Catch::Contains("{bos}") && Catch::Contains("no bos token"));
}

TEST_CASE("chat templates from TOML: tokenizer.chat_template = \"custom\" with chat_* keys", "[chat][config]") {
  const fs::path dir = testing::fresh_test_dir("chat_custom");
  const auto load = [&](const std::string& tokenizer_section) {
    const fs::path path = dir / "run.toml";
    std::ofstream(path) << "plugin = \"sft\"\n[data]\ntrain = \"t.jsonl\"\n[batch]\nglobal_size = 2\n"
                        << "[train]\nmax_steps = 1\n[tokenizer]\n"
                        << tokenizer_section;
    return config::load_run_config(path, {}, sdk::ConfigSchema());
  };
  const config::RunConfig run = load(
      "chat_template = \"custom\"\n"
      "chat_begin = \"{bos}\"\n"
      "chat_user_prefix = \"<|user|>\\n\"\n"
      "chat_assistant_prefix = \"<|assistant|>\\n\"\n"
      "chat_assistant_suffix = \"{eos}\"\n"
      "chat_turn_separator = \"\\n\"\n"
      "chat_trim_content = true\n");
  const auto chat_template = train::make_chat_template(run.tokenizer, std::nullopt);
  REQUIRE(chat_template);
  CHECK(chat_template->name == "custom");
  CHECK(sdk::segments_to_text(chat_template->render({{"user", " hi "}, {"assistant", "yo"}}, true, "x"), "<s>",
                              "</s>") == "<s><|user|>\nhi\n<|assistant|>\nyo</s>\n<|assistant|>\n");
  // A custom template can say what ChatML says.
  const config::RunConfig chatml_like = load(
      "chat_template = \"custom\"\n"
      "chat_system_prefix = \"<|im_start|>system\\n\"\nchat_system_suffix = \"<|im_end|>\"\n"
      "chat_user_prefix = \"<|im_start|>user\\n\"\nchat_user_suffix = \"<|im_end|>\"\n"
      "chat_assistant_prefix = \"<|im_start|>assistant\\n\"\nchat_assistant_suffix = \"<|im_end|>\"\n"
      "chat_turn_separator = \"\\n\"\n");
  const std::vector<sdk::ChatMessage> messages = {{"system", "s"}, {"user", "u"}, {"assistant", "a"}};
  CHECK(sdk::segments_to_text(
            train::make_chat_template(chatml_like.tokenizer, std::nullopt)->render(messages, true, "x")) ==
        sdk::segments_to_text(sdk::ChatTemplate::named("chatml").render(messages, true, "x")));

  // "auto" takes the tokenizer's own template; the byte tokenizer's is plain.
  CHECK(train::make_chat_template(load("").tokenizer, sdk::ChatTemplate::named("llama3"))->name == "llama3");
  CHECK_FALSE(train::make_chat_template(load("").tokenizer, std::nullopt).has_value());
  CHECK(train::make_tokenizer(load("").tokenizer)->chat_template()->name == "plain");

  CHECK_THAT(error_of([&] { load("chat_template = \"chatml\"\nchat_user_prefix = \"U: \"\n"); }),
             Catch::Contains("run.toml:") && Catch::Contains("tokenizer.chat_user_prefix") &&
                 Catch::Contains("only applies to tokenizer.chat_template = \"custom\""));
  CHECK_THAT(error_of([&] { load("chat_template = \"custom\"\nchat_user_prefix = \"U: \"\n"); }),
             Catch::Contains("needs 'tokenizer.chat_assistant_prefix'"));
  CHECK_THAT(error_of([&] { load("chat_template = \"zephyr\"\n"); }), Catch::Contains("tokenizer.chat_template"));
}

TEST_CASE("dataset tokenization runs in parallel and is cached by tokenizer, template, recipe and data", "[chat]") {
  const fs::path cache = testing::fresh_test_dir("chat_cache");
  const auto qwen = tokenizer::HfTokenizer::load(kExtracted / "qwen3" / "tokenizer.json");
  std::vector<sdk::Example> examples(300);
  for (size_t i = 0; i < examples.size(); ++i) {
    examples[i].index = static_cast<int64_t>(i);
    examples[i].location = "d.jsonl:" + std::to_string(i + 1);
    examples[i].fields = {{"text", "example number " + std::to_string(i) + ": héllo wörld 😀"}};
  }
  std::atomic<int> calls{0};
  const auto tokenize = [&](const sdk::Example& example) {
    ++calls;
    return sdk::TokenArrays{qwen->encode(example.fields.at("text").get<std::string>()), {-5, 1 << 30}};
  };
  sdk::TokenizeStats stats;
  const auto first = sdk::tokenize_dataset(*qwen, cache.string(), examples, "test/1", tokenize, &stats);
  CHECK_FALSE(stats.from_cache);
  CHECK(calls == 300);
  CHECK(fs::exists(stats.cache_file));
  for (size_t i = 0; i < examples.size(); ++i)
    CHECK(first[i][0] == qwen->encode(examples[i].fields.at("text").get<std::string>()));

  const auto second = sdk::tokenize_dataset(*qwen, cache.string(), examples, "test/1", tokenize, &stats);
  CHECK(stats.from_cache);
  CHECK(calls == 300);  // nothing tokenized again
  CHECK(second == first);

  // A changed example, recipe or tokenizer is a different key.
  examples[17].fields["text"] = "changed";
  sdk::tokenize_dataset(*qwen, cache.string(), examples, "test/1", tokenize, &stats);
  CHECK_FALSE(stats.from_cache);
  sdk::tokenize_dataset(*qwen, cache.string(), examples, "test/2", tokenize, &stats);
  CHECK_FALSE(stats.from_cache);
  const tokenizer::ByteTokenizer bytes;
  sdk::tokenize_dataset(bytes, cache.string(), examples, "test/2", tokenize, &stats);
  CHECK_FALSE(stats.from_cache);
  // So is another chat template on the same tokenizer; the same one is a hit.
  tokenizer::ByteTokenizer templated;
  templated.set_chat_template(sdk::ChatTemplate::named("chatml"));
  sdk::tokenize_dataset(templated, cache.string(), examples, "test/2", tokenize, &stats);
  CHECK_FALSE(stats.from_cache);
  sdk::tokenize_dataset(templated, cache.string(), examples, "test/2", tokenize, &stats);
  CHECK(stats.from_cache);
  templated.set_chat_template(sdk::ChatTemplate::named("llama3"));
  sdk::tokenize_dataset(templated, cache.string(), examples, "test/2", tokenize, &stats);
  CHECK_FALSE(stats.from_cache);

  // Errors from the plugin's function reach the caller.
  const auto failing = [](const sdk::Example& example) -> sdk::TokenArrays {
    throw sdk::DataError(example.location + ": field 'text': bad");
  };
  CHECK_THAT(error_of([&] { sdk::tokenize_dataset(bytes, "", examples, "test/3", failing); }),
             Catch::Contains("field 'text': bad"));
}
