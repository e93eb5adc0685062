// libFuzzer target: any bytes as a JSONL dataset, read failing at the first
// bad line and skipping bad lines. A rejection must be an sdk::DataError.
#include "core/data/jsonl_reader.h"
#include "fuzz_input_file.h"
#include "ptrain/sdk/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = ptrain::fuzz::write_input(data, size, "input.jsonl");
  try {
    ptrain::data::read_jsonl(path);
  } catch (const ptrain::sdk::DataError&) {
  }
  try {
    std::vector<std::string> skipped;
    const auto examples = ptrain::data::read_jsonl(path, &skipped);
    for (const auto& example : examples) {
      if (!example.fields.is_object()) __builtin_trap();
    }
  } catch (const ptrain::sdk::DataError&) {
  }
  return 0;
}
