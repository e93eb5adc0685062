// The DPO module on a real tiny model: data checks and truncation, pair
// microbatch planning, concatenated vs separate forwards vs packed rows, the
// precomputed reference cache (same gradients as a live reference; refused
// for another model or dataset), TR-DPO syncs, and config errors.
#include "catch.h"

#include "core/plugin/host_context.h"
#include "dpo_data.h"
#include "dpo_module.h"
#include "dpo_test_support.h"
#include "ptrain/sdk/errors.h"
#include "support/run_command.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <filesystem>
#include <numeric>

namespace {

using namespace ptrain;
namespace fs = std::filesystem;

// A reference model unlike the policy, saved as a Hugging Face directory.
std::string save_reference_model(const std::string& name, uint64_t seed) {
  const fs::path dir = testing::fresh_test_dir("dpo_" + name);
  model::CausalLm::init_random(testing::tiny_model_config(), seed)->save_hf_dir(dir);
  return dir.string();
}

struct Setup {
  std::unique_ptr<model::CausalLm> policy = model::CausalLm::init_random(testing::tiny_model_config(), 5);
  std::vector<at::Tensor> parameters = dpo_test::parameters_of(*policy);
  tokenizer::ByteTokenizer tokenizer;
  std::unique_ptr<dist::Communicator> communicator = dist::make_single_process_communicator();
  std::vector<sdk::Example> examples = dpo_test::to_examples(dpo_test::global_batch_pairs());

  plugin::HostContext context(const sdk::ConfigValues& values, int64_t step = 0) {
    return plugin::HostContext(*policy, tokenizer, values, *communicator,
                               sdk::RunInfo{0, dpo_test::kMaxLength, step, 0, ""});
  }
};

}  // namespace

TEST_CASE("DPO examples need prompt, chosen and rejected strings", "[dpo][data]") {
  dpo::DpoModule module;
  const auto example = [](nlohmann::json fields) { return sdk::Example{0, "prefs.jsonl:7", std::move(fields)}; };
  CHECK_NOTHROW(module.check_example(example({{"prompt", "1+1="}, {"chosen", "2"}, {"rejected", "3"}})));
  CHECK_THROWS_WITH(module.check_example(example({{"prompt", "1+1="}, {"chosen", "2"}})),
                    Catch::Contains("prefs.jsonl:7: missing field 'rejected'"));
  CHECK_THROWS_WITH(module.check_example(example({{"prompt", "1+1="}, {"chosen", 2}, {"rejected", "3"}})),
                    Catch::Contains("prefs.jsonl:7: field 'chosen': expected a string"));
  const nlohmann::json messages = nlohmann::json::array({{{"role", "assistant"}, {"content", "2"}}});
  // Message lists need a chat template (none without setup(); test_dpo_chat.cpp covers chat data).
  CHECK_THROWS_WITH(
      module.check_example(example({{"prompt", nlohmann::json::array({{{"role", "user"}, {"content", "1+1="}}})},
                                    {"chosen", messages},
                                    {"rejected", messages}})),
      Catch::Contains("prefs.jsonl:7: field 'chosen': chat data needs a chat template"));
}

TEST_CASE("an over-long pair keeps its prompt's end, then its completions' start", "[dpo][data]") {
  const tokenizer::ByteTokenizer tokenizer;
  const auto bytes = [](const std::string& text) { return std::vector<int64_t>(text.begin(), text.end()); };

  const dpo::TokenizedPair fits = dpo::tokenize_pair(tokenizer, "ab=", "cd", "e", 8, 3);
  CHECK_FALSE(fits.truncated);
  CHECK(fits.prompt == std::vector<int64_t>{256, 'a', 'b', '='});
  CHECK(fits.chosen == std::vector<int64_t>{'c', 'd', 257});
  CHECK(fits.rejected == std::vector<int64_t>{'e', 257});

  // 1 + 10 + 4 > 12: the prompt keeps max(Lp = 4, 12 − 1 − 4 = 7) = 7 bytes, completions fit.
  const dpo::TokenizedPair long_prompt = dpo::tokenize_pair(tokenizer, "0123456789", "abc", "d", 12, 4);
  CHECK(long_prompt.truncated);
  CHECK(long_prompt.prompt == std::vector<int64_t>{256, '3', '4', '5', '6', '7', '8', '9'});
  CHECK(long_prompt.chosen == std::vector<int64_t>{'a', 'b', 'c', 257});

  // A long completion: the prompt keeps Lp = 4 bytes, completions the first 12 − 1 − 4 = 7 tokens.
  const dpo::TokenizedPair long_answer = dpo::tokenize_pair(tokenizer, "0123456789", "abcdefghij", "xy", 12, 4);
  CHECK(long_answer.prompt == std::vector<int64_t>{256, '6', '7', '8', '9'});
  CHECK(long_answer.chosen == bytes("abcdefg"));  // <eos> cut
  CHECK(long_answer.rejected == std::vector<int64_t>{'x', 'y', 257});

  // A short prompt is kept whole and gives its room to the completions.
  const dpo::TokenizedPair short_prompt = dpo::tokenize_pair(tokenizer, "0", "abcdefghijklmn", "x", 12, 4);
  CHECK(short_prompt.prompt == std::vector<int64_t>{256, '0'});
  CHECK(short_prompt.chosen == bytes("abcdefghij"));
}

TEST_CASE("truncated pairs are counted in the truncated_pairs metric", "[dpo][data]") {
  Setup setup;
  const sdk::ConfigValues values = dpo_test::dpo_values();
  plugin::HostContext context = setup.context(values);
  dpo::DpoModule module;
  module.setup(context);
  const dpo_test::StepOutcome outcome = dpo_test::run_step(module, context, dpo_test::pointers_to(setup.examples),
                                                           {3, 0}, setup.parameters, *setup.communicator);
  CHECK(outcome.metrics.at("truncated_pairs") == 2.0);
  CHECK(outcome.gradient.global_units[0] == 8);
}

TEST_CASE("concatenated and separate forwards give the same loss, metrics and gradients", "[dpo][forward]") {
  Setup setup;
  const std::string reference_dir = save_reference_model("concat_reference", 21);
  const std::vector<std::map<std::string, sdk::ConfigValue>> variants{
      {},
      {{"loss", std::vector<std::string>{"sigmoid", "ipo", "sft"}},
       {"loss_weights", std::vector<double>{1.0, 0.5, 0.2}},
       {"ld_alpha", 0.5}},
      {{"loss", std::vector<std::string>{"simpo"}}, {"use_weighting", true}, {"loss_agg", std::string("token")}}};
  for (size_t v = 0; v < variants.size(); ++v) {
    INFO("variant " << v);
    std::map<std::string, double> metrics[2];
    std::vector<at::Tensor> grads[2];
    double loss[2] = {0, 0};
    for (const bool concatenated : {true, false}) {
      auto overrides = variants[v];
      overrides["concatenated"] = concatenated;
      overrides["reference_model"] = reference_dir;
      const sdk::ConfigValues values = dpo_test::dpo_values(overrides);
      plugin::HostContext context = setup.context(values);
      dpo::DpoModule module;
      module.setup(context);
      const auto examples = dpo_test::pointers_to(setup.examples);
      const auto microbatches = module.prepare(context, examples, {8, 0});
      REQUIRE(microbatches.size() == 1);
      CHECK(static_cast<const dpo::DpoMicrobatch&>(*microbatches[0]).pairs.forwards.size() == (concatenated ? 1 : 2));
      const dpo_test::StepOutcome outcome =
          dpo_test::run_step(module, context, examples, {3, 0}, setup.parameters, *setup.communicator);
      metrics[concatenated ? 0 : 1] = outcome.metrics;
      grads[concatenated ? 0 : 1] = outcome.grads;
      loss[concatenated ? 0 : 1] = outcome.metrics.at("core/loss");
    }
    CHECK(loss[1] == Approx(loss[0]).epsilon(1e-6));
    CHECK(dpo_test::relative_error(grads[1], grads[0]) <= 1e-6);
    for (const auto& [name, value] : metrics[0]) {
      if (name.rfind("core/", 0) == 0) continue;  // padded token counts differ by design
      INFO("metric " << name);
      // The two paths run different tensor shapes, so float32 rounding
      // differs. A reward is β·(log π − log π_ref) with each log π a float32
      // sum of ~100 in magnitude, whose last bit is ~8e-6: with β = 0.1 a
      // reward (and a difference of rewards such as rewards/margins, however
      // small) carries ~1e-6 of absolute rounding, hence an absolute margin
      // on top of the relative one. The GEMM kernels oneDNN picks for the CPU
      // decide which bits differ (1e-7 seen with AVX512-FP16 kernels).
      CHECK(metrics[1].at(name) == Approx(value).epsilon(1e-6).margin(1e-6));
    }
  }
}

TEST_CASE("pair microbatch planning keeps every pair once and, packed, every sequence once per row budget",
          "[dpo][packing]") {
  const tokenizer::ByteTokenizer tokenizer;
  std::vector<dpo::TokenizedPair> pairs;
  for (const dpo_test::PreferencePair& pair : dpo_test::global_batch_pairs()) {
    pairs.push_back(dpo::tokenize_pair(tokenizer, pair.prompt, pair.chosen, pair.rejected, dpo_test::kMaxLength,
                                       dpo_test::kMaxLength / 2));
  }
  const auto check_every_pair_once = [&](const std::vector<dpo::PairGroup>& groups) {
    std::vector<int64_t> seen;
    for (const dpo::PairGroup& group : groups) seen.insert(seen.end(), group.members.begin(), group.members.end());
    std::sort(seen.begin(), seen.end());
    std::vector<int64_t> all(pairs.size());
    std::iota(all.begin(), all.end(), 0);
    CHECK(seen == all);
  };

  // Unpacked: consecutive pairs, micro_size at a time.
  const std::vector<dpo::PairGroup> unpacked = dpo::plan_pair_microbatches(pairs, {3, 0});
  REQUIRE(unpacked.size() == 3);
  CHECK(unpacked[0].members == std::vector<int64_t>{0, 1, 2});
  CHECK(unpacked[2].members == std::vector<int64_t>{6, 7});
  check_every_pair_once(unpacked);
  for (const dpo::PairGroup& group : unpacked) CHECK_FALSE(group.rows.has_value());

  sdk::MicrobatchPlan packed{0, 4 * dpo_test::kMaxLength};
  packed.packing = true;
  packed.row_tokens = dpo_test::kMaxLength;
  const std::vector<dpo::PairGroup> groups = dpo::plan_pair_microbatches(pairs, packed);
  check_every_pair_once(groups);
  CHECK(groups.size() < pairs.size());  // several pairs share a microbatch
  for (const dpo::PairGroup& group : groups) {
    REQUIRE(group.rows.has_value());
    const auto count = static_cast<int64_t>(group.members.size());
    std::vector<int64_t> sequences;
    for (const std::vector<int64_t>& row : *group.rows) {
      int64_t row_length = 0;
      for (const int64_t sequence : row) {
        sequences.push_back(sequence);
        row_length += dpo::sequence_input_length(pairs[group.members[sequence % count]], sequence >= count);
      }
      CHECK(row_length <= dpo_test::kMaxLength);
    }
    std::sort(sequences.begin(), sequences.end());
    std::vector<int64_t> all(2 * count);
    std::iota(all.begin(), all.end(), 0);
    CHECK(sequences == all);

    const auto microbatch = dpo::collate_pair_group(pairs, group, tokenizer.pad_id(), true);
    CHECK(microbatch->num_examples == count);
    CHECK(microbatch->pairs.chosen_tokens.size(0) == count);
    CHECK(microbatch->pairs.forwards.size() == 1);
    CHECK(microbatch->pairs.forwards[0].input_ids.size(0) == static_cast<int64_t>(group.rows->size()));
    CHECK_FALSE(microbatch->reference_parts.defined());
  }
}

TEST_CASE("packed pairs give the loss, metrics and gradients of one pair per row", "[dpo][forward][packing]") {
  Setup setup;
  const std::string reference_dir = save_reference_model("packed_reference", 22);
  const std::vector<std::map<std::string, sdk::ConfigValue>> variants{
      {},
      {{"loss", std::vector<std::string>{"sigmoid", "ipo", "sft"}},
       {"loss_weights", std::vector<double>{1.0, 0.5, 0.2}},
       {"ld_alpha", 0.5}},
      {{"loss", std::vector<std::string>{"simpo"}}, {"loss_agg", std::string("token")}}};
  sdk::MicrobatchPlan packed{0, 4 * dpo_test::kMaxLength};
  packed.packing = true;
  packed.row_tokens = dpo_test::kMaxLength;
  for (size_t v = 0; v < variants.size(); ++v) {
    INFO("variant " << v);
    auto overrides = variants[v];
    overrides["reference_model"] = reference_dir;
    const sdk::ConfigValues values = dpo_test::dpo_values(overrides);
    plugin::HostContext context = setup.context(values);
    dpo::DpoModule module;
    module.setup(context);
    const auto examples = dpo_test::pointers_to(setup.examples);

    // The packed rows: several sequences per row, none longer than max_length.
    const auto microbatches = module.prepare(context, examples, packed);
    int64_t pairs_seen = 0;
    int64_t padded = 0;
    int64_t computed = 0;
    for (const auto& microbatch : microbatches) {
      const auto& batch = static_cast<const dpo::DpoMicrobatch&>(*microbatch);
      REQUIRE(batch.pairs.forwards.size() == 1);
      REQUIRE(batch.pairs.sequence_ids.defined());
      const sdk::TokenBatch& forward = batch.pairs.forwards[0];
      CHECK(forward.document_ids.defined());
      CHECK(forward.input_ids.size(0) < 2 * batch.num_examples);  // fewer rows than sequences
      CHECK(forward.input_ids.size(1) <= dpo_test::kMaxLength);
      pairs_seen += batch.num_examples;
      padded += forward.input_ids.numel();
      computed += batch.num_tokens;
    }
    CHECK(pairs_seen == static_cast<int64_t>(setup.examples.size()));
    INFO("padding share " << 1.0 - static_cast<double>(computed) / static_cast<double>(padded));

    dpo_test::StepOutcome outcomes[2];
    outcomes[0] = dpo_test::run_step(module, context, examples, {8, 0}, setup.parameters, *setup.communicator);
    outcomes[1] = dpo_test::run_step(module, context, examples, packed, setup.parameters, *setup.communicator);
    CHECK(outcomes[1].metrics.at("core/loss") == Approx(outcomes[0].metrics.at("core/loss")).epsilon(1e-6));
    const double error = dpo_test::relative_error(outcomes[1].grads, outcomes[0].grads);
    INFO("relative gradient error " << error);
    CHECK(error <= 1e-5);
    for (const auto& [name, value] : outcomes[0].metrics) {
      if (name.rfind("core/", 0) == 0) continue;  // padded token counts differ by design
      INFO("metric " << name);
      // Packed rows sum each sequence's float32 log-probs in another order
      // and through other matmul shapes; a reward, β times a difference of
      // two such sums, keeps their absolute rounding (2e-7 seen), hence the
      // absolute margin.
      CHECK(outcomes[1].metrics.at(name) == Approx(value).epsilon(1e-5).margin(1e-6));
    }
  }

  // WPO reads whole logits rows, which packed rows do not give.
  const sdk::ConfigValues weighted = dpo_test::dpo_values({{"use_weighting", true}});
  plugin::HostContext context = setup.context(weighted);
  dpo::DpoModule module;
  module.setup(context);
  CHECK_THROWS_WITH(module.prepare(context, dpo_test::pointers_to(setup.examples), packed),
                    Catch::Contains("use_weighting") && Catch::Contains("batch.packing"));
}

TEST_CASE("a precomputed reference gives the live reference's gradients, and its cache is reused", "[dpo][reference]") {
  Setup setup;
  const std::string reference_dir = save_reference_model("cache_reference", 33);
  const fs::path cache = testing::fresh_test_dir("dpo_cache") / "reference_logps.json";
  const auto examples = dpo_test::pointers_to(setup.examples);

  const sdk::ConfigValues live_values =
      dpo_test::dpo_values({{"reference_model", reference_dir}, {"loss", std::vector<std::string>{"sigmoid", "sft"}}});
  plugin::HostContext live_context = setup.context(live_values);
  dpo::DpoModule live;
  live.setup(live_context);
  live.prepare_dataset(live_context, setup.examples);
  CHECK(live.holds_reference_model());
  const dpo_test::StepOutcome expected =
      dpo_test::run_step(live, live_context, examples, {3, 0}, setup.parameters, *setup.communicator);

  const sdk::ConfigValues cached_values = dpo_test::dpo_values({{"reference_model", reference_dir},
                                                                {"loss", std::vector<std::string>{"sigmoid", "sft"}},
                                                                {"precompute_reference", true},
                                                                {"reference_micro_size", int64_t{3}},
                                                                {"reference_cache", cache.string()}});
  for (const char* round : {"computed", "reused"}) {
    INFO(round);
    plugin::HostContext context = setup.context(cached_values);
    dpo::DpoModule module;
    module.setup(context);
    module.prepare_dataset(context, setup.examples);
    CHECK(fs::exists(cache));
    CHECK_FALSE(module.holds_reference_model());
    const dpo_test::StepOutcome outcome =
        dpo_test::run_step(module, context, examples, {3, 0}, setup.parameters, *setup.communicator);
    CHECK(dpo_test::relative_error(outcome.grads, expected.grads) <= 1e-6);
    CHECK(outcome.metrics.at("core/loss") == Approx(expected.metrics.at("core/loss")).epsilon(1e-6));
    CHECK(outcome.metrics.at("rewards/margins") == Approx(expected.metrics.at("rewards/margins")).epsilon(1e-5));
  }
}

TEST_CASE("a reference cache from another model or dataset is refused", "[dpo][reference]") {
  Setup setup;
  const std::string model_a = save_reference_model("refuse_a", 41);
  const std::string model_b = save_reference_model("refuse_b", 42);
  const fs::path cache = testing::fresh_test_dir("dpo_refuse_cache") / "reference_logps.json";
  const auto values_for = [&](const std::string& model_dir) {
    return dpo_test::dpo_values(
        {{"reference_model", model_dir}, {"precompute_reference", true}, {"reference_cache", cache.string()}});
  };
  {
    const sdk::ConfigValues values = values_for(model_a);
    plugin::HostContext context = setup.context(values);
    dpo::DpoModule module;
    module.setup(context);
    module.prepare_dataset(context, setup.examples);
  }
  SECTION("another reference model") {
    const sdk::ConfigValues values = values_for(model_b);
    plugin::HostContext context = setup.context(values);
    dpo::DpoModule module;
    module.setup(context);
    CHECK_THROWS_WITH(module.prepare_dataset(context, setup.examples), Catch::Contains(cache.string()) &&
                                                                           Catch::Contains("another reference model") &&
                                                                           Catch::Contains("Delete the file"));
  }
  SECTION("another dataset") {
    const sdk::ConfigValues values = values_for(model_a);
    plugin::HostContext context = setup.context(values);
    dpo::DpoModule module;
    module.setup(context);
    std::vector<dpo_test::PreferencePair> pairs = dpo_test::global_batch_pairs();
    pairs[2].rejected = "changed";
    CHECK_THROWS_WITH(module.prepare_dataset(context, dpo_test::to_examples(pairs)),
                      Catch::Contains(cache.string()) && Catch::Contains("another dataset"));
  }
  SECTION("the same model and data reuse it") {
    const sdk::ConfigValues values = values_for(model_a);
    plugin::HostContext context = setup.context(values);
    dpo::DpoModule module;
    module.setup(context);
    CHECK_NOTHROW(module.prepare_dataset(context, setup.examples));
  }
}

TEST_CASE("TR-DPO mixes the policy into the reference before every sync_reference_steps-th step", "[dpo][reference]") {
  Setup setup;
  const sdk::ConfigValues values = dpo_test::dpo_values(
      {{"sync_reference", true}, {"sync_reference_steps", int64_t{2}}, {"sync_reference_alpha", 1.0}});
  const auto examples = dpo_test::pointers_to(setup.examples);
  dpo::DpoModule module;
  {
    plugin::HostContext context = setup.context(values, 0);
    module.setup(context);
  }
  const auto metrics_at = [&](int64_t step) {
    plugin::HostContext context = setup.context(values, step);
    return dpo_test::run_step(module, context, examples, {4, 0}, setup.parameters, *setup.communicator).metrics;
  };
  // The initial policy's log-probs, the frozen reference's until the first sync.
  const double initial_logps_chosen = metrics_at(1).at("logps/chosen");
  // Training moves the policy away from its frozen copy (seeded: the test must not depend on the run).
  {
    const at::NoGradGuard no_grad;
    at::manual_seed(17);
    for (const at::Tensor& parameter : setup.parameters) parameter.add_(0.05 * at::randn_like(parameter));
  }
  // rewards/chosen = β · mean over pairs of (log π(chosen) − log π_ref(chosen)): linear, so the means commute.
  const std::map<std::string, double> before_sync = metrics_at(1);
  const double moved = before_sync.at("logps/chosen") - initial_logps_chosen;
  REQUIRE(std::abs(moved) > 1e-3);
  CHECK(before_sync.at("rewards/chosen") == Approx(0.1 * moved).margin(1e-5));  // logps are float sums near -100
  // Step 2 syncs with α = 1: reference = policy, so every implicit reward is 0 (up to float rounding).
  const std::map<std::string, double> after_sync = metrics_at(2);
  CHECK(std::abs(after_sync.at("rewards/chosen")) < 1e-6);
  CHECK(std::abs(after_sync.at("rewards/rejected")) < 1e-6);
}

TEST_CASE("bco_pair's delta is the mean reward of the steps before it", "[dpo][loss]") {
  Setup setup;
  const sdk::ConfigValues values = dpo_test::dpo_values({{"loss", std::vector<std::string>{"bco_pair"}}});
  const auto examples = dpo_test::pointers_to(setup.examples);
  dpo::DpoModule module;
  {
    plugin::HostContext context = setup.context(values, 0);
    module.setup(context);
  }
  {  // away from the frozen reference, so that the rewards are not all 0
    const at::NoGradGuard no_grad;
    at::manual_seed(23);
    for (const at::Tensor& parameter : setup.parameters) parameter.add_(0.05 * at::randn_like(parameter));
  }
  const auto step = [&](int64_t index) {
    plugin::HostContext context = setup.context(values, index);
    const std::map<std::string, double> metrics =
        dpo_test::run_step(module, context, examples, {2, 0}, setup.parameters, *setup.communicator).metrics;
    module.end_step(context);
    return metrics;
  };
  const std::map<std::string, double> first = step(0);
  CHECK(first.at("bco/delta") == 0.0);  // no earlier step
  REQUIRE(std::abs(first.at("rewards/chosen") - first.at("rewards/rejected")) > 1e-4);
  // Step 1's δ: the mean over step 0's pairs of both rewards (equal counts of each).
  const std::map<std::string, double> second = step(1);
  const double want = 0.5 * (first.at("rewards/chosen") + first.at("rewards/rejected"));
  CHECK(second.at("bco/delta") == Approx(want).margin(1e-9));
  // Step 2's: the mean over both earlier steps (the policy does not move, so the same again).
  CHECK(step(2).at("bco/delta") == Approx(want).margin(1e-9));
}

TEST_CASE("DPO config errors name the key and the problem", "[dpo][config]") {
  Setup setup;
  const auto setup_with = [&](const std::map<std::string, sdk::ConfigValue>& overrides) {
    const sdk::ConfigValues values = dpo_test::dpo_values(overrides);
    plugin::HostContext context = setup.context(values);
    dpo::DpoModule module;
    module.setup(context);
  };
  CHECK_THROWS_WITH(
      setup_with({{"loss", std::vector<std::string>{"sigmod"}}}),
      Catch::Contains("test.toml:1") && Catch::Contains("module.loss") && Catch::Contains("unknown loss 'sigmod'"));
  CHECK_THROWS_WITH(
      setup_with({{"loss", std::vector<std::string>{"sigmoid", "sft"}}, {"loss_weights", std::vector<double>{1.0}}}),
      Catch::Contains("expected 2 weights"));
  CHECK_THROWS_WITH(setup_with({{"loss_weights", std::vector<double>{-1.0}}}),
                    Catch::Contains("loss_weights[0] must be a finite number >= 0, got -1.0"));
  CHECK_THROWS_WITH(setup_with({{"loss", std::vector<std::string>{"sigmoid", "sigmoid"}}}),
                    Catch::Contains("listed twice"));
  CHECK_THROWS_WITH(setup_with({{"sync_reference", true}, {"precompute_reference", true}}),
                    Catch::Contains("cannot be precomputed"));
  CHECK_THROWS_WITH(setup_with({{"sync_reference", true}, {"reference_free", true}}), Catch::Contains("uses none"));
  CHECK_THROWS_WITH(setup_with({{"loss", std::vector<std::string>{"robust"}}, {"label_smoothing", 0.5}}),
                    Catch::Contains("must be < 0.5"));
  CHECK_THROWS_WITH(setup_with({{"max_prompt_length", int64_t{39}}}), Catch::Contains("<= 38"));
  CHECK_THROWS_AS(setup_with({{"reference_model", std::string("/nonexistent/model")}}), sdk::ModelError);
}
