#include "core/tokenizer/tokenizer_model.h"

#include "core/tokenizer/byte_level_bpe.h"
#include "core/tokenizer/sentencepiece_bpe.h"

namespace ptrain::tokenizer::detail {

std::unique_ptr<Model> load_model(const nlohmann::json& model, const JsonSource& file, DecodeTable& table,
                                  bool byte_level) {
  if (!model.is_object()) file.fail("key 'model': expected an object, got " + json_type(model));
  const std::string type = model.value("type", "");
  if (type != "BPE") {
    file.fail("key 'model.type': model type '" + (type.empty() ? std::string("(none)") : type) +
              "' is not supported: ptrain reads BPE tokenizers, byte-level (GPT-2, Llama 3, Qwen, SmolLM) or "
              "SentencePiece-style (Llama 2, Mistral, Gemma), not Unigram, WordPiece or WordLevel");
  }
  if (!byte_level) return SentencePieceBpe::load(model, file, table);
  if (model.value("byte_fallback", false)) {
    file.fail(
        "key 'model.byte_fallback': true together with a ByteLevel pre-tokenizer is not supported (byte-level BPE "
        "already encodes every byte; SentencePiece-style files have no ByteLevel step)");
  }
  return ByteLevelBpe::load(model, file, table);
}

}  // namespace ptrain::tokenizer::detail
