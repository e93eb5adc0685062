// Bad KTO data and [module] keys: each a DataError naming file:line and the
// field, or a ConfigError naming file:line and the key, from the plugin's own
// checks and the config loader.
#include "catch.h"

#include "bad_inputs/module_config.h"
#include "bad_inputs/rejection.h"
#include "support/run_command.h"
#include "support/test_util.h"

#include "core/config/config_loader.h"
#include "kto_config.h"
#include "kto_module.h"
#include "ptrain/sdk/config_schema.h"

#include <filesystem>
#include <string>
#include <vector>

using namespace ptrain;
namespace fs = std::filesystem;

namespace {

const std::string kKto = testing::config_up_to_module("kto");  // its [module] keys start at line 9

struct KtoCase {
  const char* name;
  std::string text;
  std::string location;
};

}  // namespace

TEST_CASE("bad KTO examples are rejected naming file:line and the field", "[bad_inputs][data][kto]") {
  const kto::KtoModule module;
  const std::vector<KtoCase> cases = {
      {"missing label", R"({"prompt": "1+1=", "completion": "2"})", "kto.jsonl:4: missing field 'label'"},
      {"label as text", R"({"prompt": "1+1=", "completion": "2", "label": "true"})",
       "kto.jsonl:4: field 'label': expected true or false, got string \"true\""},
      {"label as a number", R"({"prompt": "1+1=", "completion": "2", "label": 1})",
       "kto.jsonl:4: field 'label': expected true or false, got number 1"},
      {"missing completion", R"({"prompt": "1+1=", "label": true})", "kto.jsonl:4: missing field 'completion'"},
      {"paired data", R"({"prompt": "1+1=", "chosen": "2", "rejected": "3"})",
       "kto.jsonl:4: a preference pair ('chosen' and 'rejected'); KTO wants one completion per example: "
       "'prompt', 'completion' and 'label'"},
      {"half a pair", R"({"prompt": "1+1=", "chosen": "2", "label": true})", "kto.jsonl:4: missing field 'completion'"},
      {"prompt not a string", R"({"prompt": ["1+1="], "completion": "2", "label": true})",
       "kto.jsonl:4: field 'prompt': expected a string, got array"},
  };
  for (const KtoCase& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const sdk::Example example{3, "kto.jsonl:4", nlohmann::json::parse(c.text)};
      testing::check_rejected([&] { module.check_example(example); }, "DataError", c.location);
    }
  }
}

TEST_CASE("bad KTO [module] keys are rejected naming file:line and the key", "[bad_inputs][config][kto]") {
  const fs::path dir = testing::fresh_test_dir("bad_kto_config");
  sdk::ConfigSchema schema;
  kto::declare_kto_config(schema);
  const std::vector<KtoCase> cases = {
      {"beta of 0", kKto + "beta = 0.0\n", ":9: key 'module.beta': must be > 0"},
      {"negative desirable_weight", kKto + "desirable_weight = -1.0\n",
       ":9: key 'module.desirable_weight': must be > 0"},
      {"undesirable_weight of 0", kKto + "undesirable_weight = 0.0\n",
       ":9: key 'module.undesirable_weight': must be > 0"},
      {"unknown loss_type", kKto + "loss_type = \"sigmoid\"\n", ":9: key 'module.loss_type': expected one of \"kto\""},
      {"DPO's key", kKto + "loss = [\"sigmoid\"]\n", ":9: unknown key 'module.loss'"},
      {"reference_model not a string", kKto + "reference_model = 3\n", ":9: key 'module.reference_model'"},
  };
  for (const KtoCase& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const fs::path file = testing::write_text_file(dir, "kto.toml", c.text);
      testing::check_rejected([&] { config::load_run_config(file, {}, schema); }, "ConfigError",
                              file.string() + c.location);
    }
  }
}
