#include "core/tokenizer/byte_tokenizer_files.h"

#include "core/tokenizer/byte_tokenizer.h"

#include <cstdio>
#include <utility>

namespace ptrain::tokenizer {
namespace {

using OrderedJson = nlohmann::ordered_json;

const std::pair<const char*, int64_t> kSpecialTokens[] = {
    {"<bos>", ByteTokenizer::kBos}, {"<eos>", ByteTokenizer::kEos}, {"<pad>", ByteTokenizer::kPad}};

OrderedJson byte_vocabulary() {
  OrderedJson vocab = OrderedJson::object();
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", byte);
    vocab[name] = byte;
  }
  return vocab;
}

}  // namespace

OrderedJson byte_tokenizer_json() {
  OrderedJson added = OrderedJson::array();
  for (const auto& [text, id] : kSpecialTokens) {
    added.push_back({{"id", id},
                     {"content", text},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  // No pre-tokenizer and no merges: the model sees the whole text, finds no
  // character in the vocabulary, and falls back to each character's bytes.
  const OrderedJson model = {{"type", "BPE"},
                             {"dropout", nullptr},
                             {"unk_token", nullptr},
                             {"continuing_subword_prefix", nullptr},
                             {"end_of_word_suffix", nullptr},
                             {"fuse_unk", false},
                             {"byte_fallback", true},
                             {"ignore_merges", false},
                             {"vocab", byte_vocabulary()},
                             {"merges", OrderedJson::array()}};
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", nullptr},
          {"post_processor", nullptr},
          {"decoder", {{"type", "Sequence"}, {"decoders", {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}}},
          {"model", model}};
}

OrderedJson byte_tokenizer_config() {
  return {{"tokenizer_class", "PreTrainedTokenizerFast"},
          {"bos_token", "<bos>"},
          {"eos_token", "<eos>"},
          {"pad_token", "<pad>"},
          {"clean_up_tokenization_spaces", false}};
}

}  // namespace ptrain::tokenizer
