// The Jinja source ptrain writes as final/tokenizer_config.json's
// "chat_template" renders what ptrain trained on: Hugging Face's own Jinja
// engine rendered these sources (tests/fixtures/chat_jinja/rendered.json, made
// by make_reference.sh with @huggingface/jinja), and ChatTemplate::render must
// give the same text for every conversation, with and without the generation
// prompt. templates.json holds the sources the reference rendered; the first
// test keeps it equal to what chat_template_jinja() writes.
#include "catch.h"
#include "json_fixture.h"

#include "core/tokenizer/chat_template_jinja.h"
#include "ptrain/sdk/chat.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

using ptrain::json_fixture::read_json;

namespace {

using namespace ptrain;
using nlohmann::json;
namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(PTRAIN_TOKENIZER_FIXTURE_DIR).parent_path() / "chat_jinja";

// A custom template whose texts need escaping in Jinja: quotes, a backslash,
// newlines, tabs, {bos}/{eos} inside other text.
sdk::ChatTemplate custom_template() {
  sdk::ChatTemplate t;
  t.name = "custom";
  t.begin = "{bos}### It's a \\ chat\n";
  t.system = {"<<SYS>>\t", "\n<</SYS>>\n"};
  t.user = {"[INST] ", " [/INST]"};
  t.assistant = {" ", " {eos}"};
  t.turn_separator = "\n";
  return t;
}

std::map<std::string, sdk::ChatTemplate> templates() {
  std::map<std::string, sdk::ChatTemplate> all;
  for (const std::string& name : sdk::ChatTemplate::builtin_names()) all.emplace(name, sdk::ChatTemplate::named(name));
  all.emplace("custom", custom_template());
  return all;
}

}  // namespace

TEST_CASE("chat_template_jinja writes the sources the reference was rendered from", "[chat][jinja]") {
  const json sources = read_json(kFixtures / "templates.json");
  for (const auto& [name, chat_template] : templates()) {
    INFO(name);
    CHECK(tokenizer::chat_template_jinja(chat_template) == sources.at(name).get<std::string>());
  }
  CHECK(sources.size() == templates().size());
}

TEST_CASE("the written Jinja renders, in Hugging Face's engine, exactly what ptrain trains on", "[chat][jinja]") {
  const json reference = read_json(kFixtures / "rendered.json");
  const std::string bos = reference.at("bos_token");
  const std::string eos = reference.at("eos_token");
  for (const auto& [name, chat_template] : templates()) {
    const json& rendered = reference.at("rendered").at(name);
    REQUIRE(rendered.size() >= 7);
    for (const json& expected : rendered) {
      INFO(name << " / " << expected.at("name").get<std::string>());
      // The same conversations, read from the files the reference read.
      std::vector<sdk::ChatMessage> messages;
      for (const fs::path& file :
           {kFixtures.parent_path() / "tokenizers" / "chat_cases.json", kFixtures / "cases.json"}) {
        for (const json& c : read_json(file)) {
          if (c.at("name") != expected.at("name")) continue;
          for (const json& m : c.at("messages")) messages.push_back({m.at("role"), m.at("content")});
        }
      }
      REQUIRE_FALSE(messages.empty());
      CHECK(sdk::segments_to_text(chat_template.render(messages, false, "test"), bos, eos) == expected.at("text"));
      CHECK(sdk::segments_to_text(chat_template.render(messages, true, "test"), bos, eos) ==
            expected.at("generation_prompt_text"));
    }
  }
}
