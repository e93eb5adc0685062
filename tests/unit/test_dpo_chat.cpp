// Messages-style DPO data: chosen and rejected as chat message lists,
// rendered with the run's chat template, against hand-built token fixtures.
#include "catch.h"

#include "core/plugin/host_context.h"
#include "dpo_chat.h"
#include "dpo_module.h"
#include "dpo_test_support.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

namespace {

using namespace ptrain;
using nlohmann::json;

constexpr int64_t kBos = tokenizer::ByteTokenizer::kBos;
constexpr int64_t kEos = tokenizer::ByteTokenizer::kEos;

std::vector<int64_t> bytes(const std::string& text) { return std::vector<int64_t>(text.begin(), text.end()); }

std::vector<int64_t> concat(std::initializer_list<std::vector<int64_t>> parts) {
  std::vector<int64_t> out;
  for (const auto& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

json message(const std::string& role, const std::string& content) { return {{"role", role}, {"content", content}}; }

sdk::Example example(json fields) { return sdk::Example{0, "prefs.jsonl:3", std::move(fields)}; }

dpo::TokenizedPair tokenize(const std::string& template_name, const json& fields, int64_t max_length = 200,
                            int64_t max_prompt_length = 100) {
  const tokenizer::ByteTokenizer tokenizer;
  return dpo::tokenize_chat_pair(tokenizer, sdk::ChatTemplate::named(template_name),
                                 dpo::read_chat_pair(example(fields)), max_length, max_prompt_length, "prefs.jsonl:3");
}

}  // namespace

TEST_CASE("DPO chat pairs: the prompt with its generation prompt, then each answer's assistant turn", "[dpo][chat]") {
  const json explicit_prompt = {{"prompt", json::array({message("user", "2+2=")})},
                                {"chosen", json::array({message("assistant", "4")})},
                                {"rejected", json::array({message("assistant", "five")})}};
  // plain: {bos} "User: " c "\n" | "Assistant: " c {eos}
  const dpo::TokenizedPair plain = tokenize("plain", explicit_prompt);
  CHECK(plain.prompt == concat({{kBos}, bytes("User: 2+2=\nAssistant: ")}));
  CHECK(plain.chosen == concat({bytes("4"), {kEos}}));
  CHECK(plain.rejected == concat({bytes("five"), {kEos}}));
  CHECK(plain.chosen_trained.empty());  // every answer token is trained
  CHECK_FALSE(plain.truncated);

  // The same pair with an implicit prompt: the messages both answers start with.
  const json implicit_prompt = {{"chosen", json::array({message("user", "2+2="), message("assistant", "4")})},
                                {"rejected", json::array({message("user", "2+2="), message("assistant", "five")})}};
  const dpo::TokenizedPair implicit = tokenize("plain", implicit_prompt);
  CHECK(implicit.prompt == plain.prompt);
  CHECK(implicit.chosen == plain.chosen);
  CHECK(implicit.rejected == plain.rejected);

  // chatml has no {bos}: the sequence starts at the prompt. The turn separator
  // after the answer's <|im_end|> is not part of the answer.
  const dpo::TokenizedPair chatml = tokenize("chatml", explicit_prompt);
  CHECK(chatml.prompt == bytes("<|im_start|>user\n2+2=<|im_end|>\n<|im_start|>assistant\n"));
  CHECK(chatml.chosen == bytes("4<|im_end|>"));
  CHECK(chatml.rejected == bytes("five<|im_end|>"));
}

TEST_CASE("DPO chat pairs: a multi-turn answer trains on its assistant turns only", "[dpo][chat]") {
  const json fields = {
      {"prompt", json::array({message("system", "be brief"), message("user", "q")})},
      {"chosen", json::array({message("assistant", "a"), message("user", "more?"), message("assistant", "b")})},
      {"rejected", json::array({message("assistant", "no")})}};
  const dpo::TokenizedPair pair = tokenize("chatml", fields);
  CHECK(pair.prompt == bytes("<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nq<|im_end|>\n"
                             "<|im_start|>assistant\n"));
  const std::string first = "a<|im_end|>";
  const std::string between = "\n<|im_start|>user\nmore?<|im_end|>\n<|im_start|>assistant\n";
  const std::string second = "b<|im_end|>";
  CHECK(pair.chosen == bytes(first + between + second));
  std::vector<uint8_t> expected_mask(first.size(), 1);
  expected_mask.insert(expected_mask.end(), between.size(), 0);
  expected_mask.insert(expected_mask.end(), second.size(), 1);
  CHECK(pair.chosen_trained == expected_mask);
  CHECK(pair.rejected_trained.empty());
  CHECK(dpo::trained_tokens(pair.chosen, pair.chosen_trained) == static_cast<int64_t>(first.size() + second.size()));

  // The forward's loss mask: target j is token j + 1, so answer token k is
  // target |prompt| − 1 + k; the user turn in between is not trained.
  const dpo::PairBatch batch = dpo::collate_pairs({pair}, tokenizer::ByteTokenizer::kPad, true);
  const at::Tensor mask = batch.forwards[0].loss_mask;
  const auto first_target = static_cast<int64_t>(pair.prompt.size()) - 1;
  for (size_t k = 0; k < pair.chosen.size(); ++k) {
    INFO("chosen token " << k);
    CHECK(mask[0][first_target + static_cast<int64_t>(k)].item<bool>() == (expected_mask[k] != 0));
  }
  CHECK(mask[0].sum().item<int64_t>() == static_cast<int64_t>(first.size() + second.size()));
  CHECK(batch.chosen_tokens[0].item<int64_t>() == static_cast<int64_t>(first.size() + second.size()));
  CHECK(batch.rejected_tokens[0].item<int64_t>() == static_cast<int64_t>(std::string("no<|im_end|>").size()));
  // LD-DPO's shared part: the first min(|chosen|, |rejected|) = 12 trained tokens of each side.
  CHECK(batch.shared_masks[0][0].sum().item<int64_t>() == 12);
  CHECK(batch.shared_masks[0][1].sum().item<int64_t>() == 12);
}

TEST_CASE("DPO chat pairs: truncation keeps the template's <bos>, the prompt's end and the answers' start",
          "[dpo][chat]") {
  const json fields = {{"prompt", json::array({message("user", "0123456789")})},
                       {"chosen", json::array({message("assistant", "abcdefghij")})},
                       {"rejected", json::array({message("assistant", "xy")})}};
  // Rendered prompt "User: 0123456789\nAssistant: " is 28 bytes; L = 24, Lp = 8:
  // it keeps max(8, 24 − 1 − 11) = 12 bytes, the answers the first 24 − 1 − 12 = 11 tokens.
  const dpo::TokenizedPair pair = tokenize("plain", fields, 24, 8);
  CHECK(pair.truncated);
  CHECK(pair.prompt == concat({{kBos}, bytes("\nAssistant: ")}));
  CHECK(pair.chosen == concat({bytes("abcdefghij"), {kEos}}));
  CHECK(pair.rejected == concat({bytes("xy"), {kEos}}));
  // L = 16: the prompt keeps max(8, 16 − 1 − 11) = 8 bytes, the answers 16 − 1 − 8 = 7 tokens.
  const dpo::TokenizedPair tight = tokenize("plain", fields, 16, 8);
  CHECK(tight.prompt == concat({{kBos}, bytes("istant: ")}));
  CHECK(tight.chosen == bytes("abcdefg"));  // <eos> cut
}

TEST_CASE("DPO chat pairs: bad message data names file:line and the field", "[dpo][chat]") {
  const auto error_of = [](const json& fields) {
    try {
      dpo::read_chat_pair(example(fields));
    } catch (const sdk::DataError& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  const json answer = json::array({message("assistant", "a")});
  CHECK_THAT(error_of({{"prompt", json::array({message("user", "q")})},
                       {"chosen", json::array({message("robot", "a")})},
                       {"rejected", answer}}),
             Catch::Contains("prefs.jsonl:3: field 'chosen[0].role': unknown role \"robot\""));
  CHECK_THAT(error_of({{"prompt", "q"}, {"chosen", answer}, {"rejected", answer}}),
             Catch::Contains("prefs.jsonl:3: field 'prompt': with message lists"));
  CHECK_THAT(error_of({{"prompt", json::array({message("user", "q")})}, {"chosen", "a"}, {"rejected", answer}}),
             Catch::Contains("field 'chosen': a string, while other fields are message lists"));
  CHECK_THAT(error_of({{"chosen", answer}, {"rejected", json::array({message("assistant", "b")})}}),
             Catch::Contains("field 'chosen': no prompt"));
  CHECK_THAT(error_of({{"chosen", json::array({message("user", "q"), message("assistant", "a")})},
                       {"rejected", json::array({message("user", "q"), message("assistant", "a")})}}),
             Catch::Contains("field 'chosen': no answer after the prompt"));
  CHECK_THAT(error_of({{"prompt", json::array({message("system", "s")})},
                       {"chosen", json::array({message("user", "q")})},
                       {"rejected", answer}}),
             Catch::Contains("field 'chosen': the answer after the prompt must start with an assistant message"));
  CHECK_THAT(error_of({{"prompt", json::array({message("user", "q")})},
                       {"chosen", json::array({{{"role", "assistant"}}})},
                       {"rejected", answer}}),
             Catch::Contains("field 'chosen[0]': missing key 'content'"));

  dpo::DpoModule module;  // not set up: no chat template
  CHECK_THROWS_WITH(module.check_example(example({{"messages", answer}})),
                    Catch::Contains("prefs.jsonl:3: field 'messages': DPO data is"));
}

TEST_CASE("DPO on chat pairs trains on the rendered answers: the step equals the reference on their text",
          "[dpo][chat]") {
  const auto policy = model::CausalLm::init_random(testing::tiny_model_config(), 11);
  const std::vector<at::Tensor> parameters = dpo_test::parameters_of(*policy);
  const auto reference = policy->frozen_copy();
  tokenizer::ByteTokenizer tokenizer;
  tokenizer.set_chat_template(sdk::ChatTemplate::named("plain"));
  const auto communicator = dist::make_single_process_communicator();

  // With the plain template a single-turn chat pair is the string pair
  // ("User: q\nAssistant: ", answer) with <bos> and <eos>, which the
  // independent reference scores byte by byte.
  const std::vector<dpo_test::PreferencePair> strings{{"User: 1+1=\nAssistant: ", "2", "3"},
                                                      {"User: hello\nAssistant: ", "hi there", "go away"}};
  std::vector<sdk::Example> examples;
  for (size_t i = 0; i < strings.size(); ++i) {
    const std::string user = strings[i].prompt.substr(6, strings[i].prompt.find('\n') - 6);
    examples.push_back({static_cast<int64_t>(i), "chat.jsonl:" + std::to_string(i + 1),
                        json{{"prompt", json::array({message("user", user)})},
                             {"chosen", json::array({message("assistant", strings[i].chosen)})},
                             {"rejected", json::array({message("assistant", strings[i].rejected)})}}});
  }
  const sdk::ConfigValues values = dpo_test::dpo_values();
  plugin::HostContext context(*policy, tokenizer, values, *communicator,
                              sdk::RunInfo{0, dpo_test::kMaxLength, 0, 0, ""});
  dpo::DpoModule module;
  module.setup(context);
  for (const sdk::Example& e : examples) module.check_example(e);
  module.prepare_dataset(context, examples);
  const dpo_test::StepOutcome outcome =
      dpo_test::run_step(module, context, dpo_test::pointers_to(examples), {1, 0}, parameters, *communicator);

  dpo_test::clear_gradients(parameters);
  dpo_test::reference_step_loss(*policy, reference.get(), strings, dpo_test::ReferenceSpec{}).backward();
  const std::vector<at::Tensor> expected = dpo_test::gradients_of(parameters);
  REQUIRE(outcome.grads.size() == expected.size());
  // Over all parameters at once: an elementwise tolerance fails on entries
  // that are zero up to rounding.
  const double error = testing::relative_error(outcome.grads, expected);
  INFO("relative gradient error " << error);
  CHECK(error <= 1e-5);
  CHECK(outcome.gradient.global_units[0] == 2);
}
