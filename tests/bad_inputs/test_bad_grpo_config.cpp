// Bad [module] keys of the GRPO plugin's policy losses and dynamic sampling:
// each a ConfigError naming file:line and the key, from the TOML a user
// writes through the same loader and the plugin's own reader.
#include "catch.h"

#include "bad_inputs/module_config.h"
#include "bad_inputs/rejection.h"
#include "support/run_command.h"
#include "support/test_util.h"

#include "core/config/config_loader.h"
#include "grpo_config.h"
#include "ptrain/sdk/config_schema.h"

#include <filesystem>
#include <string>
#include <vector>

using namespace ptrain;
namespace fs = std::filesystem;

namespace {

const std::string kGrpo = testing::config_up_to_module("grpo");  // its [module] keys start at line 9

sdk::ConfigSchema grpo_schema() {
  sdk::ConfigSchema schema;
  grpo::declare_grpo_config(schema);
  return schema;
}

struct GrpoCase {
  const char* name;
  std::string module;    // the [module] keys, from line 9
  std::string location;  // appended to the file path
  std::string message;   // part of the message after it
};

}  // namespace

TEST_CASE("bad GRPO policy-loss and dynamic-sampling keys name file:line and key", "[bad_inputs][config][grpo]") {
  const fs::path dir = testing::fresh_test_dir("bad_grpo_config");
  const std::vector<GrpoCase> cases{
      {"unknown policy_loss", "policy_loss = \"ppo\"\n", ":9: key 'module.policy_loss'",
       "expected one of \"clip\", \"cispo\", \"sapo\""},
      {"policy_loss of the wrong type", "policy_loss = 1\n", ":9: key 'module.policy_loss'", ""},
      {"cispo_epsilon_low above 1", "policy_loss = \"cispo\"\ncispo_epsilon_low = 1.5\n",
       ":10: key 'module.cispo_epsilon_low'", ""},
      {"negative cispo_epsilon_high", "policy_loss = \"cispo\"\ncispo_epsilon_high = -0.1\n",
       ":10: key 'module.cispo_epsilon_high'", ""},
      {"sapo_tau_pos of 0", "policy_loss = \"sapo\"\nsapo_tau_pos = 0.0\n", ":10: key 'module.sapo_tau_pos'", ""},
      {"negative sapo_tau_neg", "policy_loss = \"sapo\"\nsapo_tau_neg = -1.0\n", ":10: key 'module.sapo_tau_neg'", ""},
      {"a CISPO key under clip", "cispo_epsilon_high = 0.3\n", ":9: key 'module.cispo_epsilon_high'",
       "applies to policy_loss = \"cispo\", but policy_loss is \"clip\""},
      {"a SAPO key under cispo", "policy_loss = \"cispo\"\nsapo_tau_neg = 2.0\n", ":10: key 'module.sapo_tau_neg'",
       "applies to policy_loss = \"sapo\", but policy_loss is \"cispo\""},
      {"the clip's ε under sapo", "policy_loss = \"sapo\"\nepsilon_high = 0.28\n", ":10: key 'module.epsilon_high'",
       "applies to policy_loss = \"clip\""},
      {"the clip's ε_low off its default under cispo", "policy_loss = \"cispo\"\nepsilon_low = 0.3\n",
       ":10: key 'module.epsilon_low'", "applies to policy_loss = \"clip\""},
      {"the dual clip under cispo", "policy_loss = \"cispo\"\ndelta = 3.0\n", ":10: key 'module.delta'",
       "applies to policy_loss = \"clip\""},
      {"max_generation_rounds of 0", "filter_zero_std_groups = true\nmax_generation_rounds = 0\n",
       ":10: key 'module.max_generation_rounds'", ""},
      {"max_generation_rounds not an integer", "filter_zero_std_groups = true\nmax_generation_rounds = 2.5\n",
       ":10: key 'module.max_generation_rounds'", ""},
      {"refill without the filter", "max_generation_rounds = 4\n", ":9: key 'module.max_generation_rounds'",
       "but module.filter_zero_std_groups is false"},
      {"an empty stop string", "stop_strings = [\"</answer>\", \"\"]\n", ":9: key 'module.stop_strings'",
       "stop_strings[1] is empty, which stops nothing"},
  };
  for (const GrpoCase& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const fs::path file = testing::write_text_file(dir, "grpo.toml", kGrpo + c.module);
      const testing::Rejection rejection = testing::rejection_of([&] {
        const config::RunConfig config = config::load_run_config(file, {}, grpo_schema());
        grpo::read_grpo_config(config.module);
      });
      INFO(rejection.message);
      CHECK(rejection.kind == "ConfigError");
      CHECK_THAT(rejection.message, Catch::Contains(file.string() + c.location));
      CHECK_THAT(rejection.message, Catch::Contains(c.message));
    }
  }
  SECTION("the same keys, well formed, are accepted") {
    for (const std::string module :
         {"policy_loss = \"cispo\"\ncispo_epsilon_low = 0.2\ncispo_epsilon_high = 4.0\n",
          "policy_loss = \"sapo\"\nsapo_tau_pos = 1.0\nsapo_tau_neg = 1.05\n",
          "filter_zero_std_groups = true\nmax_generation_rounds = 3\n",
          // A resolved config.toml writes every default out, the other losses' included.
          "policy_loss = \"sapo\"\nepsilon_low = 0.2\ncispo_epsilon_low = 1.0\ncispo_epsilon_high = 0.28\n"}) {
      const fs::path file = testing::write_text_file(dir, "grpo.toml", kGrpo + module);
      const grpo::GrpoConfig config = grpo::read_grpo_config(config::load_run_config(file, {}, grpo_schema()).module);
      CHECK(config.max_generation_rounds >= 1);
    }
  }
}
