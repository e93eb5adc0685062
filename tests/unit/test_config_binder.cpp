// sdk::ConfigBinder: one declaration per key gives the schema, the reader
// (choices to enums, nested fields, optional and unset keys) and the writer.
#include "catch.h"

#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/config_binder.h"

#include <optional>
#include <string>
#include <vector>

namespace sdk = ptrain::sdk;

namespace {

enum class Mode { kFast, kExact };
enum class Part { kA, kB, kC };

struct Inner {
  double scale = 0.0;
};

struct Example {
  int64_t steps = 0;
  double rate = 0.0;
  bool verbose = false;
  std::string path;
  std::vector<std::string> names;
  std::vector<double> weights;
  std::optional<double> bound;
  uint64_t seed = 0;
  Mode mode = Mode::kFast;
  std::vector<Part> parts;
  Inner inner;
};

const sdk::ConfigBinder<Example>& binder() {
  static const auto binder =
      sdk::ConfigBinder<Example>()
          .key("steps", &Example::steps, sdk::required, "updates to run", sdk::at_least(1))
          .key("rate", &Example::rate, 0.5, "a rate", sdk::above(0.0).below(1.0))
          .key("verbose", &Example::verbose, true, "say more")
          .key("path", &Example::path, sdk::unset, "where")
          .key("names", &Example::names, std::vector<std::string>{"x"}, "names")
          .key("weights", &Example::weights, std::vector<double>{}, "weights", sdk::between(0.0, 2.0))
          .key("bound", &Example::bound, sdk::unset, "an optional bound", sdk::at_least(1.0))
          .key("seed", &Example::seed, 7, "seed")
          .choice("mode", &Example::mode, sdk::Choices<Mode>{{"fast", Mode::kFast}, {"exact", Mode::kExact}},
                  Mode::kExact, "how")
          .choice("parts", &Example::parts,
                  sdk::Choices<Part>{{"a", Part::kA}, {"b", Part::kB}, {"c", Part::kC}},
                  std::vector<Part>{Part::kA, Part::kC}, "which parts")
          .key("scale", [](auto& c) -> auto& { return c.inner.scale; }, 2.0, "nested");
  return binder;
}

}  // namespace

TEST_CASE("config binder: the schema carries type, default, bounds and choices of each key", "[config][binder]") {
  const sdk::ConfigSchema schema = binder().schema();
  REQUIRE(schema.keys().size() == 11);

  const sdk::ConfigKey& steps = *schema.find("steps");
  CHECK(steps.type == sdk::ValueType::kInt);
  CHECK(steps.required);
  CHECK_FALSE(steps.default_value);
  CHECK(*steps.min == 1.0);
  CHECK_FALSE(steps.min_exclusive);

  const sdk::ConfigKey& rate = *schema.find("rate");
  CHECK(rate.type == sdk::ValueType::kFloat);
  CHECK(std::get<double>(*rate.default_value) == 0.5);
  CHECK(*rate.min == 0.0);
  CHECK(rate.min_exclusive);
  CHECK(*rate.max == 1.0);
  CHECK(rate.max_exclusive);

  CHECK(schema.find("path")->type == sdk::ValueType::kString);
  CHECK_FALSE(schema.find("path")->default_value);
  CHECK_FALSE(schema.find("path")->required);
  CHECK(schema.find("names")->type == sdk::ValueType::kStringList);
  CHECK(schema.find("weights")->type == sdk::ValueType::kFloatList);
  CHECK(schema.find("bound")->type == sdk::ValueType::kFloat);
  CHECK(schema.find("seed")->type == sdk::ValueType::kInt);
  CHECK(std::get<int64_t>(*schema.find("seed")->default_value) == 7);

  const sdk::ConfigKey& mode = *schema.find("mode");
  CHECK(mode.type == sdk::ValueType::kString);
  CHECK(mode.choices == std::vector<std::string>{"fast", "exact"});
  CHECK(std::get<std::string>(*mode.default_value) == "exact");
  const sdk::ConfigKey& parts = *schema.find("parts");
  CHECK(parts.type == sdk::ValueType::kStringList);
  CHECK(parts.choices == std::vector<std::string>{"a", "b", "c"});
  CHECK(std::get<std::vector<std::string>>(*parts.default_value) == std::vector<std::string>{"a", "c"});
}

TEST_CASE("config binder: read fills fields from values, choices as enums, nested fields too", "[config][binder]") {
  sdk::ConfigValues values = sdk::ConfigValues::defaults_of(binder().schema(), "module");
  values.set("steps", int64_t{12}, "x.toml:2", true);
  values.set("mode", std::string("fast"), "x.toml:3", true);
  values.set("parts", std::vector<std::string>{"b"}, "x.toml:4", true);
  values.set("bound", 3.0, "x.toml:5", true);
  values.set("scale", 0.25, "x.toml:6", true);

  const Example read = binder().read(values);
  CHECK(read.steps == 12);
  CHECK(read.rate == 0.5);
  CHECK(read.verbose);
  CHECK(read.path.empty());
  CHECK(read.names == std::vector<std::string>{"x"});
  CHECK(read.weights.empty());
  CHECK(read.bound == 3.0);
  CHECK(read.seed == 7u);
  CHECK((read.mode == Mode::kFast));
  CHECK((read.parts == std::vector<Part>{Part::kB}));
  CHECK(read.inner.scale == 0.25);

  const Example defaults = binder().defaults();
  CHECK((defaults.mode == Mode::kExact));
  CHECK((defaults.parts == std::vector<Part>{Part::kA, Part::kC}));
  CHECK_FALSE(defaults.bound);
  CHECK(defaults.inner.scale == 2.0);
}

TEST_CASE("config binder: write lists each key with a value, leaving out unset ones", "[config][binder]") {
  Example example = binder().defaults();
  example.steps = 3;
  std::vector<std::pair<std::string, sdk::ConfigValue>> written = binder().write(example);
  std::vector<std::string> keys;
  for (const auto& [key, value] : written) keys.push_back(key);
  // path (unset, empty) and bound (unset optional) are left out.
  CHECK(keys == std::vector<std::string>{"steps", "rate", "verbose", "names", "weights", "seed", "mode", "parts",
                                         "scale"});
  CHECK(std::get<std::string>(written[6].second) == "exact");
  CHECK(std::get<std::vector<std::string>>(written[7].second) == std::vector<std::string>{"a", "c"});

  example.path = "runs/x";
  example.bound = 1.5;
  written = binder().write(example);
  CHECK(written.size() == 11);
  // What was written reads back as the same struct.
  sdk::ConfigValues values("module");
  for (const auto& [key, value] : written) values.set(key, value, "x.toml:1", true);
  const Example again = binder().read(values);
  CHECK(again.path == "runs/x");
  CHECK(again.bound == 1.5);
  CHECK((again.parts == example.parts));
}

TEST_CASE("config binder: a declaration error or an unknown spelling names the key", "[config][binder]") {
  CHECK_THROWS_WITH(sdk::ConfigBinder<Example>()
                        .key("steps", &Example::steps, 1, "a")
                        .key("steps", &Example::steps, 2, "again"),
                    Catch::Contains("'steps' twice"));
  // Values built by hand (not validated against the schema) may hold any spelling.
  sdk::ConfigValues values = sdk::ConfigValues::defaults_of(binder().schema(), "module");
  values.set("mode", std::string("slow"), "x.toml:9", true);
  CHECK_THROWS_AS(binder().read(values), sdk::ConfigError);
  CHECK_THROWS_WITH(binder().read(values),
                    "x.toml:9: key 'module.mode': unknown mode 'slow' (expected one of: fast, exact)");
}
