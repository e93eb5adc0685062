// The byte tokenizer (byte_tokenizer.h) as Hugging Face tokenizer files, so a
// model trained with it loads in transformers (AutoTokenizer) as it is:
//   tokenizer.json         BPE without merges over the 256 byte tokens <0x00>…<0xFF>
//                          (ids 0–255) with byte_fallback, so every character becomes
//                          its UTF-8 bytes; <bos>, <eos>, <pad> special tokens 256–258;
//                          decoders ByteFallback + Fuse
//   tokenizer_config.json  PreTrainedTokenizerFast with those three tokens
// Hugging Face's tokenizers give the same ids as ByteTokenizer::encode
// (tests/fixtures/byte_tokenizer), except that they read the texts "<bos>",
// "<eos>", "<pad>" in the input as the special tokens (which is what lets a
// chat template write bos_token), where ptrain encodes their bytes.
#pragma once

#include <nlohmann/json.hpp>

namespace ptrain::tokenizer {

nlohmann::ordered_json byte_tokenizer_json();
nlohmann::ordered_json byte_tokenizer_config();

}  // namespace ptrain::tokenizer
