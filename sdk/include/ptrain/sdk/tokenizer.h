// The tokenizer a plugin encodes text with. The core implements it: the
// built-in byte tokenizer, and Hugging Face tokenizer.json (byte-level BPE).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ptrain::sdk {

class ChatTemplate;

// The input pieces one token's bytes come from: pieces[first] to pieces[last].
struct PieceRange {
  size_t first = 0;
  size_t last = 0;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Text to ids, without bos/eos. Special tokens written in the text (e.g.
  // "<|im_end|>") become their ids, as Hugging Face's encode does.
  virtual std::vector<int64_t> encode(std::string_view text) const = 0;
  // Ids to text; special ids are skipped.
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  // -1 when the model has no such token (Qwen has no bos: sequences start
  // without one, as in transformers).
  virtual int64_t bos_id() const = 0;
  virtual int64_t eos_id() const = 0;
  virtual int64_t pad_id() const = 0;
  virtual int64_t vocab_size() const = 0;  // smallest vocab a model must have

  // Encodes the concatenation of `pieces` exactly as encode() would and sets
  // pieces_of_id[i] to the pieces whose bytes id i covers (a token that
  // straddles a boundary covers both sides). Chat loss masks use it: the text
  // is tokenized once, and ids are attributed to turns afterwards. The
  // default encodes each piece on its own, which is exact only for
  // tokenizers whose ids never span two pieces (bytes); BPE overrides it.
  virtual std::vector<int64_t> encode_pieces(const std::vector<std::string_view>& pieces,
                                             std::vector<PieceRange>& pieces_of_id) const;

  // The id of an added/special token given its text ("<|im_end|>"), if any.
  virtual std::optional<int64_t> token_id(std::string_view token) const { return std::nullopt; }

  // Identifies the vocabulary, merges and settings, so caches of token ids
  // (sdk/util/token_cache.h) are never reused with another tokenizer.
  virtual std::string fingerprint() const = 0;

  // The run's chat template (tokenizer.chat_template; by default the one
  // tokenizer_config.json names, "plain" for the byte tokenizer), or nullptr
  // when the run has none. In transformers too the template belongs to the tokenizer.
  virtual const ChatTemplate* chat_template() const { return nullptr; }
};

}  // namespace ptrain::sdk
