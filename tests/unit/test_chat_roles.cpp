// Chat roles. The model's own template (chat_template = "auto") decides which
// roles a conversation may have: SFT and DPO take the `tool` turn Qwen3's
// template renders, and train only the assistant's turns around it. The
// built-in templates know system, user and assistant and refuse anything
// else by name. Every plugin checks every example's structure in
// check_example, before training starts: GRPO refuses an empty conversation
// as SFT and DPO do.
#include "catch.h"
#include "dpo_test_support.h"
#include "grpo_test_support.h"
#include "support/test_util.h"

#include "core/dist/communicator.h"
#include "core/plugin/host_context.h"
#include "core/tokenizer/byte_tokenizer.h"
#include "core/tokenizer/hf_tokenizer.h"
#include "dpo_module.h"
#include "grpo_module.h"
#include "ptrain/sdk/chat.h"
#include "ptrain/sdk/errors.h"
#include "sft_config.h"
#include "sft_module.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <string>

using namespace ptrain;
namespace fs = std::filesystem;
using nlohmann::json;
using ptrain::testing::error_of;

namespace {

const fs::path kExtracted = PTRAIN_TOKENIZER_EXTRACTED_DIR;

json message(const std::string& role, const std::string& content) { return {{"role", role}, {"content", content}}; }

sdk::Example example(json fields) { return sdk::Example{0, "chat.jsonl:4", std::move(fields)}; }

// A tool call and its result between a user's question and the final answer.
const json kToolConversation =
    json::array({message("user", "What is the weather in Paris?"), message("assistant", "Let me look it up."),
                 message("tool", "{\"temperature_c\": 21}"), message("assistant", "It is 21 degrees in Paris.")});

// A plugin module set up as a run sets it up, on `tokenizer` and its template.
template <class Module>
struct ModuleSetup {
  std::unique_ptr<model::CausalLm> policy = model::CausalLm::init_random(testing::tiny_model_config(), 0);
  std::unique_ptr<dist::Communicator> communicator = dist::make_single_process_communicator();
  std::unique_ptr<plugin::HostContext> context;
  Module module;

  ModuleSetup(const sdk::Tokenizer& tokenizer, const sdk::ConfigValues& values) {
    context = std::make_unique<plugin::HostContext>(*policy, tokenizer, values, *communicator,
                                                    sdk::RunInfo{0, 512, 0, 0, ""});
    module.setup(*context);
  }
};

sdk::ConfigValues sft_values() {
  sdk::ConfigSchema schema;
  sft::declare_sft_config(schema);
  return sdk::ConfigValues::defaults_of(schema, "module");
}

std::unique_ptr<tokenizer::HfTokenizer> qwen_with_own_template() {
  auto qwen = tokenizer::HfTokenizer::load(kExtracted / "qwen3" / "tokenizer.json");
  qwen->set_chat_template(qwen->own_chat_template());
  return qwen;
}

}  // namespace

TEST_CASE("chat auto: SFT takes a tool turn the model's template renders and trains only the assistant's",
          "[chat][sft]") {
  const auto qwen = qwen_with_own_template();
  ModuleSetup<sft::SftModule> sft(*qwen, sft_values());
  const sdk::Example chat = example({{"messages", kToolConversation}});
  CHECK_NOTHROW(sft.module.check_example(chat));

  const sft::TokenizedExample tokenized = sft.module.tokenize(*qwen, chat, 512);
  std::vector<int64_t> trained;
  for (size_t i = 0; i < tokenized.tokens.size(); ++i) {
    if (tokenized.trainable[i]) trained.push_back(tokenized.tokens[i]);
  }
  const std::string trained_text = qwen->decode(trained);
  CHECK_THAT(trained_text, Catch::Contains("Let me look it up."));
  CHECK_THAT(trained_text, Catch::Contains("It is 21 degrees in Paris."));
  CHECK_THAT(trained_text, !Catch::Contains("temperature_c"));  // the tool's output is context only
  CHECK_THAT(trained_text, !Catch::Contains("weather"));

  // The template still decides: a conversation must end with the assistant's turn.
  json unanswered = kToolConversation;
  unanswered.erase(3);
  CHECK_THAT(error_of([&] {
               sft.module.check_example(example({{"messages", unanswered}}));
             }),
             Catch::Contains("chat.jsonl:4: field 'messages': the last message must be the assistant's"));
}

TEST_CASE("built-in templates refuse a role they do not know, naming it, in SFT, DPO and GRPO", "[chat]") {
  tokenizer::ByteTokenizer bytes;
  bytes.set_chat_template(sdk::ChatTemplate::named("chatml"));
  ModuleSetup<sft::SftModule> sft(bytes, sft_values());
  CHECK_THAT(error_of([&] {
               sft.module.check_example(example({{"messages", kToolConversation}}));
             }),
             Catch::Contains("chat.jsonl:4: field 'messages[2].role': unknown role \"tool\""));

  ModuleSetup<dpo::DpoModule> dpo(bytes, dpo_test::dpo_values());
  const json prompt = json::array({kToolConversation[0], kToolConversation[1], kToolConversation[2]});
  const json pair = {{"prompt", prompt},
                     {"chosen", json::array({kToolConversation[3]})},
                     {"rejected", json::array({message("assistant", "No idea.")})}};
  CHECK_THAT(error_of([&] { dpo.module.check_example(example(pair)); }),
             Catch::Contains("chat.jsonl:4: field 'prompt[2].role': unknown role \"tool\""));

  ModuleSetup<grpo::GrpoModule> grpo(bytes,
                                     grpo_test::grpo_values({{"reward_funcs", std::vector<std::string>{"length"}}}));
  CHECK_THAT(error_of([&] {
               grpo.module.check_example(example({{"messages", prompt}}));
             }),
             Catch::Contains("chat.jsonl:4: field 'messages[2].role': unknown role \"tool\""));
}

TEST_CASE("chat auto: DPO takes a tool turn in the prompt the model's template renders", "[chat][dpo]") {
  const auto qwen = qwen_with_own_template();
  ModuleSetup<dpo::DpoModule> dpo(*qwen, dpo_test::dpo_values());
  const json prompt = json::array({kToolConversation[0], kToolConversation[1], kToolConversation[2]});
  const json pair = {{"prompt", prompt},
                     {"chosen", json::array({kToolConversation[3]})},
                     {"rejected", json::array({message("assistant", "No idea.")})}};
  CHECK_NOTHROW(dpo.module.check_example(example(pair)));
}

TEST_CASE("GRPO checks every prompt's structure before training: empty conversations, no template, roles",
          "[chat][grpo]") {
  const sdk::ConfigValues values = grpo_test::grpo_values({{"reward_funcs", std::vector<std::string>{"length"}}});
  tokenizer::ByteTokenizer bytes;
  bytes.set_chat_template(sdk::ChatTemplate::named("plain"));
  ModuleSetup<grpo::GrpoModule> grpo(bytes, values);
  CHECK_NOTHROW(grpo.module.check_example(example({{"messages", json::array({message("user", "2+2?")})}})));
  CHECK_THAT(error_of([&] {
               grpo.module.check_example(example({{"messages", json::array()}}));
             }),
             Catch::Contains("chat.jsonl:4: field 'messages': empty conversation"));
  CHECK_THAT(error_of([&] {
               grpo.module.check_example(example({{"messages", json::array({message("robot", "x")})}}));
             }),
             Catch::Contains("chat.jsonl:4: field 'messages[0].role': unknown role \"robot\""));

  tokenizer::ByteTokenizer no_template;
  no_template.set_chat_template(std::nullopt);
  ModuleSetup<grpo::GrpoModule> without(no_template, values);
  CHECK_THAT(error_of([&] {
               without.module.check_example(example({{"messages", json::array({message("user", "q")})}}));
             }),
             Catch::Contains("chat.jsonl:4: field 'messages': chat prompts need a chat template"));

  // The model's own template decides the roles of a prompt too.
  const auto qwen = qwen_with_own_template();
  ModuleSetup<grpo::GrpoModule> auto_grpo(*qwen, values);
  const json prompt = json::array({kToolConversation[0], kToolConversation[1], kToolConversation[2]});
  CHECK_NOTHROW(auto_grpo.module.check_example(example({{"messages", prompt}})));
}
