// libFuzzer target: any bytes as a tokenizer.json. A rejection must be an
// sdk::ConfigError; a tokenizer that loads must encode and decode text.
#include "core/tokenizer/hf_tokenizer.h"
#include "ptrain/sdk/errors.h"

#include <nlohmann/json.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json parsed = nlohmann::json::parse(data, data + size, nullptr, false);
  if (parsed.is_discarded()) return 0;  // the JSON parser is not what is under test
  try {
    const auto tokenizer = ptrain::tokenizer::HfTokenizer::from_json(parsed, nullptr, "fuzz/tokenizer.json");
    for (const char* text : {"Hello, world! 123", "  tabs\tand\nnewlines  ", "naïve 日本語 🤖", ""}) {
      (void)tokenizer->decode(tokenizer->encode(text));
    }
  } catch (const ptrain::sdk::ConfigError&) {
  }
  return 0;
}
