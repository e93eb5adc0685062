// Empty answers are valid data (docs/file-formats.md#datasets, as TRL does): an SFT completion
// "" or an assistant turn with empty content trains exactly one target, the
// end-of-turn token; a DPO answer "" is <eos> alone. The expected losses are
// computed here from CausalLm::logits and a full-vocabulary log_softmax on the
// sequence written out by hand, not through the plugin's tokenizing, collate
// or log-prob code. An example left with no trained token (its prompt
// truncated to max_length) is still skipped.
#include "catch.h"

#include "support/test_util.h"

#include "core/dist/communicator.h"
#include "core/model/causal_lm.h"
#include "core/plugin/host_context.h"
#include "core/tokenizer/byte_tokenizer.h"
#include "dpo_chat.h"
#include "dpo_data.h"
#include "sft_config.h"
#include "sft_module.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <string>
#include <vector>

namespace {

using namespace ptrain;

constexpr int64_t kBos = 256;
constexpr int64_t kEos = 257;
constexpr int64_t kMaxLength = 40;

std::vector<int64_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

// −log p(next | context) from the model's full logits at the context's last position.
double next_token_nll(model::CausalLm& model, const std::vector<int64_t>& context, int64_t next) {
  const at::NoGradGuard no_grad;
  const at::Tensor ids = at::tensor(context, at::kLong).unsqueeze(0);
  const at::Tensor last = model.logits(ids)[0][-1].to(at::kDouble);
  return -at::log_softmax(last, 0)[next].item<double>();
}

sdk::ConfigValues sft_values() {
  sdk::ConfigSchema schema;
  sft::declare_sft_config(schema);
  sdk::ConfigValues values = sdk::ConfigValues::defaults_of(schema, "module");
  values.set("loss_agg", std::string("token_mean"), "test", true);
  return values;
}

struct SftRun {
  std::unique_ptr<model::CausalLm> model = model::CausalLm::init_random(testing::tiny_model_config(), 11);
  tokenizer::ByteTokenizer tokenizer;
  std::unique_ptr<dist::Communicator> communicator = dist::make_single_process_communicator();
  sdk::ConfigValues values = sft_values();

  SftRun() { tokenizer.set_chat_template(sdk::ChatTemplate::named("plain")); }

  // The loss sum and the trained-token count of one example in one microbatch.
  std::pair<double, int64_t> loss_of(const nlohmann::json& fields) {
    plugin::HostContext context(*model, tokenizer, values, *communicator, sdk::RunInfo{0, kMaxLength, 0, 0, ""});
    sft::SftModule module;
    module.setup(context);
    const sdk::Example example{0, "data.jsonl:1", fields};
    module.check_example(example);  // valid data: does not throw
    auto microbatches = module.prepare(context, {&example}, sdk::MicrobatchPlan{1, 0});
    REQUIRE(microbatches.size() == 1);
    const int64_t units = module.count_units(*microbatches[0])[0];
    const sdk::LossOut out = module.microbatch_loss(context, *microbatches[0]);
    return {out.loss_sums.at(0).item<double>(), units};
  }
};

}  // namespace

TEST_CASE("SFT: an empty completion trains <eos> after the prompt, and only it", "[empty_answers][sft]") {
  SftRun run;
  const auto [loss_sum, units] = run.loss_of({{"prompt", "2+2="}, {"completion", ""}});
  CHECK(units == 1);
  std::vector<int64_t> context{kBos};
  for (const int64_t byte : bytes_of("2+2=")) context.push_back(byte);
  CHECK(loss_sum == Approx(next_token_nll(*run.model, context, kEos)).epsilon(1e-5));

  const sft::TokenizedExample tokenized = sft::tokenize_example(run.tokenizer, "2+2=", "", kMaxLength);
  CHECK(tokenized.trainable == std::vector<uint8_t>{0, 0, 0, 0, 0, 1});
}

TEST_CASE("SFT chat: an assistant turn with empty content trains its end-of-turn token, and only it",
          "[empty_answers][sft][chat]") {
  SftRun run;
  const nlohmann::json messages =
      nlohmann::json::array({{{"role", "user"}, {"content", "hi"}}, {{"role", "assistant"}, {"content", ""}}});
  const auto [loss_sum, units] = run.loss_of({{"messages", messages}});
  CHECK(units == 1);
  // The plain template: {bos} "User: " c "\n" "Assistant: " c {eos}.
  std::vector<int64_t> context{kBos};
  for (const int64_t byte : bytes_of("User: hi\nAssistant: ")) context.push_back(byte);
  CHECK(loss_sum == Approx(next_token_nll(*run.model, context, kEos)).epsilon(1e-5));
}

TEST_CASE("SFT: an example whose prompt fills max_length is still left out, not trained as empty",
          "[empty_answers][sft]") {
  SftRun run;
  const std::string prompt(kMaxLength + 5, 'p');
  CHECK_FALSE(sft::tokenize_example(run.tokenizer, prompt, "", kMaxLength).has_trainable_target());
  plugin::HostContext context(*run.model, run.tokenizer, run.values, *run.communicator,
                              sdk::RunInfo{0, kMaxLength, 0, 0, ""});
  sft::SftModule module;
  module.setup(context);
  const sdk::Example example{0, "data.jsonl:1", {{"prompt", prompt}, {"completion", ""}}};
  CHECK(module.prepare(context, {&example}, sdk::MicrobatchPlan{1, 0}).empty());
}

TEST_CASE("DPO: an empty answer is <eos> alone, as a string or as an empty assistant turn", "[empty_answers][dpo]") {
  tokenizer::ByteTokenizer tokenizer;
  const dpo::TokenizedPair strings = dpo::tokenize_pair(tokenizer, "q", "", "no", kMaxLength, 0);
  CHECK(strings.prompt == std::vector<int64_t>{kBos, 'q'});
  CHECK(strings.chosen == std::vector<int64_t>{kEos});
  CHECK(dpo::trained_tokens(strings.chosen, strings.chosen_trained) == 1);

  const sdk::Example example{0,
                             "prefs.jsonl:1",
                             {{"prompt", nlohmann::json::array({{{"role", "user"}, {"content", "q"}}})},
                              {"chosen", nlohmann::json::array({{{"role", "assistant"}, {"content", ""}}})},
                              {"rejected", nlohmann::json::array({{{"role", "assistant"}, {"content", "no"}}})}}};
  const dpo::TokenizedPair chat = dpo::tokenize_chat_pair(tokenizer, sdk::ChatTemplate::named("plain"),
                                                          dpo::read_chat_pair(example), kMaxLength, 0, "prefs.jsonl:1");
  CHECK(chat.chosen == std::vector<int64_t>{kEos});
  CHECK(dpo::trained_tokens(chat.chosen, chat.chosen_trained) == 1);
  CHECK(chat.rejected == std::vector<int64_t>{'n', 'o', kEos});
  // The pair's log-ratio term sees −log p(<eos> | prompt) for the empty answer:
  // the step loss of such pairs is checked against the formula in
  // test_dpo_invariance (its global batch holds {"x", "", "y"}).
}
