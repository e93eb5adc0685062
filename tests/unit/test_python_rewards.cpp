// Reward functions written in Python (core/rewards/python_reward.h): the
// fixture's functions score batches as computed here by hand, every batch
// field reaches them, the GIL is free between calls, each way a function can
// break the contract stops with its name (and the traceback), and GRPO
// trains on a python: reward with the reference gradient.
#include "catch.h"

#include "grpo_test_support.h"

#include "dpo_test_support.h"
#include "support/test_util.h"

#include "core/plugin/host_context.h"
#include "core/plugin/reward_library.h"
#include "core/rewards/python_reward.h"
#include "grpo_module.h"
#include "ptrain/sdk/errors.h"

#include <chrono>
#include <filesystem>
#include <future>

namespace {

using namespace ptrain;
namespace fs = std::filesystem;

const fs::path kRewardFile = fs::path(PTRAIN_TEST_FIXTURE_DIR) / "rewards" / "python_rewards.py";

// Two completions of one prompt; the second example has a rubric field, the first none.
struct Batch {
  sdk::Example plain{0, "prompts.jsonl:7", nlohmann::json{{"prompt", "1+1="}, {"answer", "2"}}};
  sdk::Example with_rubric{1, "prompts.jsonl:8",
                           nlohmann::json{{"prompt", "3*3="}, {"answer", "9"}, {"rubric", {{"bonus", 2}}}}};
  std::vector<sdk::RewardInput> inputs{{&plain, "1+1=", " 2 ", 4, false}, {&with_rubric, "3*3=", "a1b22", 5, true}};
};

std::unique_ptr<sdk::RewardFunction> python_function(const std::string& name) {
  return rewards::open_python_reward_file(kRewardFile.string())->create(name);
}

}  // namespace

TEST_CASE("a Python reward file offers the public functions it defines", "[rewards][python]") {
  const std::unique_ptr<sdk::RewardLibrary> file = rewards::open_python_reward_file(kRewardFile.string());
  CHECK(file->path() == fs::canonical(kRewardFile).string());
  CHECK(file->name() == "python_rewards");
  // Not _score_or_fail (private), THRESHOLD (not callable) or math (imported).
  CHECK(file->function_names() == std::vector<std::string>{"digit_count", "uses_every_argument", "raises",
                                                           "wrong_length", "not_finite", "not_a_number", "not_a_list",
                                                           "characters", "registered"});
}

TEST_CASE("Python reward functions score the batch from its lists", "[rewards][python]") {
  Batch batch;
  CHECK(python_function("digit_count")->score(batch.inputs) == std::vector<double>{1.0, 3.0});
  // exact answer + 10·len(prompt) + 100·tokens + 1000·truncated + 10000·rubric.bonus (None: absent)
  const std::vector<double> expected{1.0 + 10.0 * 4 + 100.0 * 4, 0.0 + 10.0 * 4 + 100.0 * 5 + 1000.0 + 10000.0 * 2};
  CHECK(python_function("uses_every_argument")->score(batch.inputs) == expected);
}

TEST_CASE("bytes that are not UTF-8 reach a Python reward as U+FFFD", "[rewards][python]") {
  Batch batch;
  batch.inputs[0].completion = "a\xA7z";  // a byte-level model may sample any byte
  // 3 characters, one of them U+FFFD (+100); "a1b22": 5
  CHECK(python_function("characters")->score(batch.inputs) == std::vector<double>{103.0, 5.0});
}

TEST_CASE("two Python files of one name load as two modules", "[rewards][python]") {
  Batch batch;
  const fs::path second = kRewardFile.parent_path() / "second" / "python_rewards.py";
  std::unique_ptr<sdk::RewardFunction> first_digits = python_function("digit_count");
  std::unique_ptr<sdk::RewardFunction> second_digits =
      rewards::open_python_reward_file(second.string())->create("digit_count");
  CHECK(first_digits->score(batch.inputs) == std::vector<double>{1.0, 3.0});
  CHECK(second_digits->score(batch.inputs) == std::vector<double>{2.0, 6.0});
  CHECK(python_function("registered")->score(batch.inputs) == std::vector<double>{1.0, 1.0});
}

TEST_CASE("the GIL is free between calls: another thread may score", "[rewards][python]") {
  Batch batch;
  std::unique_ptr<sdk::RewardFunction> digits = python_function("digit_count");
  for (int round = 0; round < 2; ++round) {
    std::future<std::vector<double>> scores =
        std::async(std::launch::async, [&] { return digits->score(batch.inputs); });
    REQUIRE(scores.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
    CHECK(scores.get() == std::vector<double>{1.0, 3.0});
  }
}

TEST_CASE("a Python reward that breaks the contract stops with its name and the reason", "[rewards][python]") {
  Batch batch;
  const std::string file = fs::canonical(kRewardFile).string();
  auto score_error = [&](const std::string& name) {
    std::string message = "(no error)";
    try {
      python_function(name)->score(batch.inputs);
    } catch (const sdk::PluginError& error) {
      message = error.what();
    }
    return message;
  };
  SECTION("an exception: its traceback, down to the line that raised") {
    const std::string error = score_error("raises");
    CHECK_THAT(error, Catch::StartsWith("reward function 'raises' of " + file + " raised an exception:\n"));
    CHECK_THAT(error, Catch::Contains("Traceback (most recent call last):") &&
                          Catch::Contains("line 30, in _score_or_fail") &&
                          Catch::Contains("ValueError: cannot score ' 2 '"));
  }
  SECTION("an exception the call itself raises (no traceback frame of the function)") {
    const fs::path call_errors = fs::canonical(fs::path(PTRAIN_TEST_FIXTURE_DIR) / "rewards" / "call_errors.py");
    std::string error = "(no error)";
    try {
      rewards::open_python_reward_file(call_errors.string())->create("needs_gold")->score(batch.inputs);
    } catch (const sdk::PluginError& e) {
      error = e.what();
    }
    CHECK_THAT(error, Catch::StartsWith("reward function 'needs_gold' of " + call_errors.string() +
                                        " raised an exception:\n"));
    CHECK_THAT(error,
               Catch::Contains("TypeError") && Catch::Contains("missing 1 required positional argument: 'gold'"));
  }
  SECTION("the wrong number of scores") {
    CHECK(score_error("wrong_length") ==
          "reward function 'wrong_length' of " + file + " returned 3 scores for 2 completions");
  }
  SECTION("a non-finite score, with the example it was for") {
    CHECK(score_error("not_finite") == "reward function 'not_finite' of " + file +
                                           " returned nan for completion #2 (prompts.jsonl:8); rewards must be finite");
  }
  SECTION("something that is not a number") {
    CHECK(score_error("not_a_number") ==
          "reward function 'not_a_number' of " + file + " returned None for completion #2; expected a number");
  }
  SECTION("not a list") {
    CHECK(score_error("not_a_list") ==
          "reward function 'not_a_list' of " + file + " returned a float; expected a list of numbers");
  }
}

TEST_CASE("Python reward files and names that cannot be used are config errors naming the file",
          "[rewards][python][bad_inputs]") {
  const std::string file = fs::canonical(kRewardFile).string();
  auto config_error = [](const std::function<void()>& action) {
    std::string message = "(no error)";
    try {
      action();
    } catch (const sdk::ConfigError& error) {
      message = error.what();
    }
    return message;
  };
  CHECK(config_error([&] { python_function("nope"); }) ==
        file +
            ": defines no function 'nope'; it defines digit_count, uses_every_argument, raises, wrong_length, "
            "not_finite, not_a_number, not_a_list, characters, registered");
  CHECK(config_error([&] { python_function("THRESHOLD"); }) == file + ": 'THRESHOLD' is a float, not a function");
  const fs::path missing = fs::path(PTRAIN_TEST_FIXTURE_DIR) / "rewards" / "missing.py";
  CHECK(config_error([&] { rewards::open_python_reward_file(missing.string()); }) ==
        "python reward file '" + missing.string() + "': no such file");
  const std::string import_fails = (fs::path(PTRAIN_TEST_FIXTURE_DIR) / "rewards" / "import_fails.py").string();
  const std::string error = config_error([&] { rewards::open_python_reward_file(import_fails); });
  CHECK_THAT(error,
             Catch::StartsWith("python reward file '" + import_fails + "': importing it raised an exception:\n"));
  CHECK_THAT(error, Catch::Contains("import_fails.py\", line 4, in <module>") &&
                        Catch::Contains("json.decoder.JSONDecodeError"));
  // A function without **kwargs is refused when it is set up, naming it and its file.
  const fs::path call_errors = fs::canonical(fs::path(PTRAIN_TEST_FIXTURE_DIR) / "rewards" / "call_errors.py");
  CHECK_THAT(config_error([&] { rewards::open_python_reward_file(call_errors.string())->create("exact"); }),
             Catch::StartsWith(call_errors.string() + ": reward function 'exact' takes no **kwargs"));
  // The core's reward loader opens python: specs (Context::open_reward_library).
  CHECK(plugin::load_reward_library("python:" + kRewardFile.string(), {})->function_names().size() == 9);
}

TEST_CASE("GRPO trains on a Python reward function", "[grpo][rewards][python]") {
  std::unique_ptr<model::CausalLm> policy = model::CausalLm::init_random(testing::tiny_model_config(), 51);
  std::vector<at::Tensor> parameters = dpo_test::parameters_of(*policy);
  tokenizer::ByteTokenizer tokenizer;
  const std::vector<grpo_test::Prompt> prompts = grpo_test::global_batch_prompts();
  const std::vector<sdk::Example> examples = grpo_test::to_examples(prompts);
  const std::vector<const sdk::Example*> pointers = dpo_test::pointers_to(examples);
  std::unique_ptr<dist::Communicator> communicator = dist::make_single_process_communicator();

  // Digits of the injected completions, by hand ("12345678…" is cut at 8 bytes, no <eos>).
  const std::vector<std::vector<double>> digits{{1, 1, 2}, {2, 2, 2}, {1, 0, 8}, {0, 0, 0}};
  const std::vector<std::vector<double>> accuracy{{1, 0, 0}, {1, 1, 1}, {1, 0, 0}, {0, 1, 0}};
  grpo_test::ReferenceSpec spec;
  spec.function_rewards = {accuracy, digits};
  spec.reward_weights = {1.0, 0.5};
  dpo_test::clear_gradients(parameters);
  const at::Tensor expected_loss = grpo_test::reference_step_loss(*policy, nullptr, nullptr, prompts, spec);
  expected_loss.backward();
  const std::vector<at::Tensor> expected = dpo_test::gradients_of(parameters);

  const sdk::ConfigValues values = grpo_test::grpo_values(
      {{"reward_funcs", std::vector<std::string>{"accuracy", "python:" + kRewardFile.string() + ":digit_count"}},
       {"reward_weights", std::vector<double>{1.0, 0.5}}});
  plugin::HostContext host(*policy, tokenizer, values, *communicator, sdk::RunInfo{0, grpo_test::kMaxLength, 0, 0, ""});
  grpo_test::FixedRolloutEngine engine(prompts);
  grpo_test::InjectedContext context(host, engine);
  grpo::GrpoModule module;
  module.setup(context);
  for (const int64_t micro_size : {1, 12}) {
    INFO("micro_size " << micro_size);
    const dpo_test::StepOutcome outcome =
        dpo_test::run_step(module, context, pointers, {micro_size, 0}, parameters, *communicator);
    const double error = testing::relative_error(outcome.grads, expected);
    INFO("relative gradient error " << error);
    CHECK(error <= 1e-5);
    CHECK(outcome.metrics.at("core/loss") == Approx(expected_loss.item<double>()).epsilon(1e-5));
    CHECK(outcome.metrics.at("rewards/digit_count/mean") == Approx(19.0 / 12.0));
    CHECK(outcome.metrics.at("reward") == Approx((6.0 + 0.5 * 19.0) / 12.0));
  }
}
