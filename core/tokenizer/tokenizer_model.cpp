#include "core/tokenizer/tokenizer_model.h"

#include "core/tokenizer/byte_level_bpe.h"

namespace ptrain::tokenizer::detail {

std::unique_ptr<Model> load_model(const nlohmann::json& model, const JsonSource& file, DecodeTable& table) {
  if (!model.is_object()) file.fail("key 'model': expected an object, got " + json_type(model));
  const std::string type = model.value("type", "");
  if (type != "BPE") {
    file.fail("model type '" + (type.empty() ? std::string("(none)") : type) +
              "' is not supported: ptrain reads byte-level BPE tokenizers (GPT-2, Llama 3, Qwen, SmolLM), not "
              "Unigram, WordPiece or WordLevel");
  }
  if (model.value("byte_fallback", false)) {
    file.fail(
        "model.byte_fallback = true (SentencePiece-style BPE, e.g. Llama 2 or Mistral) is not supported; only "
        "byte-level BPE is");
  }
  return ByteLevelBpe::load(model, file, table);
}

}  // namespace ptrain::tokenizer::detail
