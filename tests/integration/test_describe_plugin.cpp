// `ptrain plugins --describe NAME` is generated from the schema the plugin
// exports: every key appears with its type, default, allowed values and doc.
#include "catch.h"

#include "core/plugin/plugin_loader.h"
#include "support/run_command.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

using namespace ptrain;

namespace {

// The two lines `--describe` prints for `name`, or "" when it is missing.
std::string key_block(const std::string& output, const std::string& name) {
  const std::string head = "\n  " + name + "  ";
  const size_t at = output.find(head);
  if (at == std::string::npos) return "";
  const size_t first_end = output.find('\n', at + 1);
  const size_t second_end = output.find('\n', first_end + 1);
  return output.substr(at + 1, second_end - at - 1);
}

// Bounds as the schema holds them, in the plain form --describe shows.
std::string bound_text(double value, sdk::ValueType type) {
  if (type == sdk::ValueType::kInt) return std::to_string(static_cast<int64_t>(value));
  std::ostringstream out;
  out << value;
  return out.str();
}

}  // namespace

TEST_CASE("plugins --describe prints each bundled plugin's schema, key by key", "[e2e][describe]") {
  const auto dirs = plugin::plugin_search_dirs({});
  for (const std::string name : {"sft", "dpo", "grpo", "kto"}) {
    DYNAMIC_SECTION("plugin " << name) {
      const sdk::ConfigSchema schema = plugin::load_plugin(name, dirs).config_schema();
      const testing::CommandResult described = testing::run_ptrain("plugins --describe " + name);
      INFO(described.output);
      REQUIRE(described.exit_code == 0);
      CHECK_THAT(described.output, Catch::StartsWith("plugin " + name + " "));
      REQUIRE_FALSE(schema.keys().empty());
      size_t blocks = 0;
      for (const sdk::ConfigKey& key : schema.keys()) {
        const std::string block = key_block(described.output, key.name);
        INFO("key " << key.name << ": " << block);
        REQUIRE_FALSE(block.empty());
        ++blocks;
        CHECK_THAT(block, Catch::StartsWith("  " + key.name + "  " + sdk::value_type_name(key.type) + ", default "));
        if (key.default_value) {
          CHECK_THAT(block, Catch::Contains(", default " + sdk::format_config_value(*key.default_value)));
        } else {
          CHECK_THAT(block, Catch::Contains(key.required ? ", default required" : ", default unset"));
        }
        for (const std::string& choice : key.choices) CHECK_THAT(block, Catch::Contains(choice));
        if (key.min && key.choices.empty()) CHECK_THAT(block, Catch::Contains(bound_text(*key.min, key.type)));
        if (key.max && key.choices.empty()) CHECK_THAT(block, Catch::Contains(bound_text(*key.max, key.type)));
        CHECK_THAT(block, Catch::EndsWith("\n      " + key.doc));
      }
      // Nothing beyond the schema: two lines per key after the header.
      const auto lines = static_cast<size_t>(std::count(described.output.begin(), described.output.end(), '\n'));
      CHECK(lines == 4 + 2 * blocks);
    }
  }
  const testing::CommandResult unknown = testing::run_ptrain("plugins --describe no_such_plugin");
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.output, Catch::Contains("plugin 'no_such_plugin' not found"));
}
