// Reward functions from reward libraries (sdk/reward_plugin.h): GRPO scores
// injected rollouts with a function of tests/plugins/test_reward_plugin.cpp
// and trains on the reference gradient; a function keeps its library loaded
// and its exceptions outlive it; bad libraries and names are refused with
// the path, the config key and the reason.
#include "catch.h"

#include "grpo_test_support.h"

#include "dpo_test_support.h"
#include "support/run_command.h"

#include "core/plugin/host_context.h"
#include "core/plugin/reward_library.h"
#include "grpo_module.h"
#include "ptrain/sdk/errors.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

namespace {

using namespace ptrain;
namespace fs = std::filesystem;

const fs::path kTestRewards = fs::path(PTRAIN_TEST_PLUGIN_DIR) / "libptrain_reward_test_rewards.so";

struct Fixture {
  std::unique_ptr<model::CausalLm> policy = model::CausalLm::init_random(testing::tiny_model_config(), 51);
  std::vector<at::Tensor> parameters = dpo_test::parameters_of(*policy);
  tokenizer::ByteTokenizer tokenizer;
  std::vector<grpo_test::Prompt> prompts = grpo_test::global_batch_prompts();
  std::vector<sdk::Example> examples = grpo_test::to_examples(prompts);
  std::vector<const sdk::Example*> pointers = dpo_test::pointers_to(examples);
  std::unique_ptr<dist::Communicator> communicator = dist::make_single_process_communicator();
};

// The message of the error GrpoModule::setup throws for `overrides`, "(no error)" if none.
std::string setup_error(Fixture& f, const std::map<std::string, sdk::ConfigValue>& overrides) {
  const sdk::ConfigValues values = grpo_test::grpo_values(overrides);
  plugin::HostContext host(*f.policy, f.tokenizer, values, *f.communicator,
                           sdk::RunInfo{0, grpo_test::kMaxLength, 0, 0, ""});
  grpo::GrpoModule module;
  return testing::error_of([&] { module.setup(host); });
}

// Whether the library at `path` is loaded in this process (without loading it).
bool is_loaded(const fs::path& path) {
  void* handle = ::dlopen(fs::canonical(path).c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return false;
  ::dlclose(handle);
  return true;
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) { ::setenv(name, value.c_str(), 1); }
  ~ScopedEnv() { ::unsetenv(name_); }

 private:
  const char* name_;
};

}  // namespace

TEST_CASE("GRPO trains on a reward function from a reward library", "[grpo][reward_plugin]") {
  Fixture f;
  // digit_count of the injected completions, by hand ("12345678…" is cut at 8 bytes, no <eos>).
  const std::vector<std::vector<double>> digits{{1, 1, 2}, {2, 2, 2}, {1, 0, 8}, {0, 0, 0}};
  const std::vector<std::vector<double>> accuracy{{1, 0, 0}, {1, 1, 1}, {1, 0, 0}, {0, 1, 0}};
  grpo_test::ReferenceSpec spec;
  spec.function_rewards = {accuracy, digits};
  spec.reward_weights = {1.0, 0.5};
  dpo_test::clear_gradients(f.parameters);
  const at::Tensor expected_loss = grpo_test::reference_step_loss(*f.policy, nullptr, nullptr, f.prompts, spec);
  expected_loss.backward();
  const std::vector<at::Tensor> expected = dpo_test::gradients_of(f.parameters);

  const ScopedEnv plugin_path("PTRAIN_PLUGIN_PATH", PTRAIN_TEST_PLUGIN_DIR);
  for (const std::string& library : {kTestRewards.string(), std::string("test_rewards")}) {
    DYNAMIC_SECTION("reward_plugins = [\"" << library << "\"]") {
      const sdk::ConfigValues values =
          grpo_test::grpo_values({{"reward_plugins", std::vector<std::string>{library}},
                                  {"reward_funcs", std::vector<std::string>{"accuracy", "digit_count"}},
                                  {"reward_weights", std::vector<double>{1.0, 0.5}}});
      plugin::HostContext host(*f.policy, f.tokenizer, values, *f.communicator,
                               sdk::RunInfo{0, grpo_test::kMaxLength, 0, 0, ""});
      grpo_test::FixedRolloutEngine engine(f.prompts);
      grpo_test::InjectedContext context(host, engine);
      grpo::GrpoModule module;
      module.setup(context);
      for (const int64_t micro_size : {1, 4, 12}) {
        INFO("micro_size " << micro_size);
        const dpo_test::StepOutcome outcome =
            dpo_test::run_step(module, context, f.pointers, {micro_size, 0}, f.parameters, *f.communicator);
        const double error = testing::relative_error(outcome.grads, expected);
        INFO("relative gradient error " << error);
        CHECK(error <= 1e-5);
        CHECK(outcome.metrics.at("core/loss") == Approx(expected_loss.item<double>()).epsilon(1e-5));
        CHECK(outcome.metrics.at("rewards/digit_count/mean") == Approx(19.0 / 12.0));
        CHECK(outcome.metrics.at("rewards/accuracy/mean") == Approx(6.0 / 12.0));
        CHECK(outcome.metrics.at("reward") == Approx((6.0 + 0.5 * 19.0) / 12.0));
      }
    }
  }
}

TEST_CASE("a reward function keeps its library loaded, and its errors outlive it", "[grpo][reward_plugin]") {
  REQUIRE_FALSE(is_loaded(kTestRewards));
  auto library = plugin::load_reward_library(kTestRewards.string(), {});
  CHECK(library->name() == "test_rewards");
  CHECK(library->path() == fs::canonical(kTestRewards).string());
  CHECK(library->function_names() ==
        std::vector<std::string>{"digit_count", "same_first_byte", "throws", "not_finite", "one_short"});
  std::unique_ptr<sdk::RewardFunction> digits = library->create("digit_count");
  library.reset();
  CHECK(is_loaded(kTestRewards));  // the function holds it
  const sdk::Example example{0, "prompts.jsonl:7", nlohmann::json{{"prompt", "1+1="}, {"answer", "2"}}};
  const std::vector<sdk::RewardInput> inputs{{&example, "1+1=", "a1b22", 6, false}, {&example, "1+1=", "", 1, false}};
  CHECK(digits->name() == "digit_count");
  CHECK(digits->score(inputs) == std::vector<double>{3.0, 0.0});
  digits.reset();
  CHECK_FALSE(is_loaded(kTestRewards));

  // The exception is caught after the function and its library are gone: it must be the host's.
  std::string message;
  try {
    std::unique_ptr<sdk::RewardFunction> throws = plugin::load_reward_library(kTestRewards.string(), {})->create("throws");
    throws->score(inputs);
  } catch (const sdk::DataError& error) {
    CHECK_FALSE(is_loaded(kTestRewards));
    message = error.what();
  }
  CHECK(message == "prompts.jsonl:7: field 'rubric': missing (test_rewards)");
}

TEST_CASE("reward functions that break the contract are reported by name", "[grpo][reward_plugin]") {
  Fixture f;
  for (const auto& [function, expected] : std::vector<std::pair<std::string, std::string>>{
           {"throws", "prompts.jsonl:1: field 'rubric': missing (test_rewards)"},
           {"not_finite", "rewards must be finite"},
           {"one_short", "reward function 'one_short' returned 11 scores for 12 completions"}}) {
    INFO("reward function " << function);
    const sdk::ConfigValues values =
        grpo_test::grpo_values({{"reward_plugins", std::vector<std::string>{kTestRewards.string()}},
                                {"reward_funcs", std::vector<std::string>{"accuracy", function}}});
    plugin::HostContext host(*f.policy, f.tokenizer, values, *f.communicator,
                             sdk::RunInfo{0, grpo_test::kMaxLength, 0, 0, ""});
    grpo_test::FixedRolloutEngine engine(f.prompts);
    grpo_test::InjectedContext context(host, engine);
    grpo::GrpoModule module;
    module.setup(context);
    const std::string error = testing::error_of([&] { module.prepare(context, f.pointers, {4, 0}); });
    CHECK_THAT(error, Catch::Contains(expected));
    if (function == "not_finite") CHECK_THAT(error, Catch::Contains("'not_finite'") && Catch::Contains("prompts.jsonl:1"));
  }
}

TEST_CASE("bad reward libraries and names are refused with the key, the path and the reason",
          "[grpo][reward_plugin][bad_inputs]") {
  Fixture f;
  const std::string where = "test.toml:1: key 'module.reward_plugins': ";
  auto with_library = [](const std::string& library, const std::string& function = "digit_count") {
    return std::map<std::string, sdk::ConfigValue>{{"reward_plugins", std::vector<std::string>{library}},
                                                   {"reward_funcs", std::vector<std::string>{"accuracy", function}}};
  };

  SECTION("built for another SDK ABI") {
    const std::string path = (fs::path(PTRAIN_TEST_PLUGIN_DIR) / "libptrain_reward_abi_mismatch.so").string();
    const std::string error = setup_error(f, with_library(path));
    CHECK_THAT(error, Catch::StartsWith(where + path) &&
                          Catch::Contains("reward library built for SDK ABI version " +
                                          std::to_string(sdk::kAbiVersion + 1000)) &&
                          Catch::Contains("this ptrain supports ABI version " + std::to_string(sdk::kAbiVersion)) &&
                          Catch::Contains("rebuild the reward library against SDK"));
  }
  SECTION("an algorithm plugin, or no ptrain library at all") {
    CHECK_THAT(setup_error(f, with_library(PTRAIN_SFT_PLUGIN_PATH)),
               Catch::StartsWith(where + PTRAIN_SFT_PLUGIN_PATH) &&
                   Catch::Contains("not a ptrain reward library (no 'ptrain_reward_plugin_info' entry point)") &&
                   Catch::Contains("it is an algorithm plugin"));
    const std::string other = (fs::path(PTRAIN_TEST_PLUGIN_DIR) / "libnot_a_plugin.so").string();
    CHECK_THAT(setup_error(f, with_library(other)), Catch::Contains("not a ptrain reward library"));
  }
  SECTION("a missing file, a name not on the plugin path") {
    CHECK(setup_error(f, with_library("/nonexistent/libptrain_reward_x.so")) ==
          where + "/nonexistent/libptrain_reward_x.so: reward library file does not exist");
    const ScopedEnv plugin_path("PTRAIN_PLUGIN_PATH", PTRAIN_TEST_PLUGIN_DIR);
    CHECK_THAT(setup_error(f, with_library("nope")),
               Catch::StartsWith(where + "reward library 'nope' not found: no libptrain_reward_nope.so in") &&
                   Catch::Contains(PTRAIN_TEST_PLUGIN_DIR));
  }
  SECTION("a library in a world-writable directory") {
    const fs::path dir = testing::fresh_test_dir("reward_world_writable");
    fs::copy_file(kTestRewards, dir / kTestRewards.filename());
    fs::permissions(dir, fs::perms::all);
    CHECK_THAT(setup_error(f, with_library((dir / kTestRewards.filename()).string())),
               Catch::Contains("refusing to load a reward library from the world-writable directory"));
    fs::permissions(dir, fs::perms::owner_all);
  }
  SECTION("a function no source offers, or more than one") {
    CHECK_THAT(setup_error(f, with_library(kTestRewards.string(), "digits")),
               Catch::Contains("test.toml:1: key 'module.reward_funcs': unknown reward function 'digits'") &&
                   Catch::Contains("accuracy, format, length, closeness, digit_count, same_first_byte"));
    // Without reward_plugins the name is refused when the config is read.
    CHECK_THAT(setup_error(f, {{"reward_funcs", std::vector<std::string>{"digit_count"}}}),
               Catch::Contains("key 'module.reward_funcs': unknown reward function 'digit_count'") &&
                   Catch::Contains("(none is)"));
    // Two copies of the library both offer digit_count.
    const fs::path dir = testing::fresh_test_dir("reward_copy");
    fs::copy_file(kTestRewards, dir / "libptrain_reward_copy.so");
    const std::string copy = (dir / "libptrain_reward_copy.so").string();
    CHECK_THAT(setup_error(f, {{"reward_plugins", std::vector<std::string>{kTestRewards.string(), copy}},
                               {"reward_funcs", std::vector<std::string>{"digit_count"}}}),
               Catch::Contains("key 'module.reward_funcs': reward function 'digit_count' is ambiguous: offered by ") &&
                   Catch::Contains(copy));
    // The same library by path and by name is one library listed twice.
    const ScopedEnv plugin_path("PTRAIN_PLUGIN_PATH", PTRAIN_TEST_PLUGIN_DIR);
    CHECK_THAT(setup_error(f, {{"reward_plugins", std::vector<std::string>{kTestRewards.string(), "test_rewards"}},
                               {"reward_funcs", std::vector<std::string>{"digit_count"}}}),
               Catch::Contains("'test_rewards' are the same library"));
  }
  SECTION("a reward library named as the run's plugin") {
    const std::string error = testing::error_of([] { plugin::load_plugin_file(kTestRewards); });
    CHECK_THAT(error, Catch::Contains("not a ptrain plugin") && Catch::Contains("it is a reward library"));
  }
}
