// libFuzzer target: any bytes as a TOML config, loaded, resolved against a
// small plugin schema and written back with to_toml. A rejection must be an
// sdk::ConfigError (or UsageError); a resolved config must load again.
#include "core/config/config_loader.h"
#include "fuzz_input_file.h"
#include "ptrain/sdk/errors.h"

namespace {

ptrain::sdk::ConfigSchema module_schema() {
  ptrain::sdk::ConfigSchema schema;
  schema.add_string("loss_agg", "token_mean", "aggregation", {"token_mean", "sum"});
  schema.add_float("beta", 0.1, "coefficient", 0.0);
  schema.add_int("group_size", 4, "group", 1);
  schema.add_bool("normalize", true, "normalize");
  return schema;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ptrain::sdk::ConfigSchema schema = module_schema();
  const auto path = ptrain::fuzz::write_input(data, size, "input.toml");
  try {
    const ptrain::config::RunConfig config = ptrain::config::load_run_config(path, {}, schema);
    const std::string text = ptrain::config::to_toml(config, schema);
    const auto round_trip =
        ptrain::fuzz::write_input(reinterpret_cast<const uint8_t*>(text.data()), text.size(), "round_trip.toml");
    // What to_toml writes must load again: a failure here is a bug, so it is not caught.
    (void)ptrain::config::load_run_config(round_trip, {}, schema);
  } catch (const ptrain::sdk::ConfigError&) {
  } catch (const ptrain::sdk::UsageError&) {
  }
  return 0;
}
