// Hugging Face tokenizer.json, BPE of either kind, encoding token for token
// as the `tokenizers` library does:
//   byte-level (GPT-2, Llama 3, Qwen 2/2.5/3, SmolLM): a ByteLevel
//     pre-tokenizer, merges over the bytes of each word, decoder ByteLevel;
//   SentencePiece-style (Llama 2, Mistral, Gemma): no ByteLevel step, spaces
//     turned into "▁" by a Replace (+ Prepend) normalizer or a Metaspace
//     pre-tokenizer, merges over characters with `<0xNN>` byte fallback,
//     decoders Replace, ByteFallback, Fuse, Strip.
//
// encode(text) = for each span between added tokens (matched first, leftmost
// longest, honouring lstrip/rstrip/single_word): normalizer (NFC/NFD/NFKC/NFKD,
// Lowercase, Replace, Prepend), pre-tokenizers (Metaspace, Split with the
// file's regex via PCRE2, Digits, ByteLevel with its GPT-2 regex and
// add_prefix_space), then ranked BPE merges over each word (or the whole word
// when `ignore_merges` is set and the word is in the vocabulary). decode()
// skips special tokens and maps the others back to text, invalid UTF-8
// replaced by U+FFFD. Post-processors are not applied: callers add bos/eos
// themselves.
//
// tokenizer_config.json beside the file gives bos/eos/pad and the model's
// Jinja chat template; without a pad token the eos token pads (as TRL does).
// Anything else — Unigram, WordPiece, WordLevel, unknown normalizers,
// pre-tokenizers or decoders — is refused with an error naming the file and
// the key of the unsupported component.
#pragma once

#include "ptrain/sdk/chat.h"
#include "ptrain/sdk/tokenizer.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

namespace ptrain::tokenizer {

class HfTokenizer final : public sdk::Tokenizer {
 public:
  // Reads tokenizer.json and, when present, tokenizer_config.json in the same
  // directory. Throws sdk::ConfigError naming the file and key.
  static std::unique_ptr<HfTokenizer> load(const std::filesystem::path& tokenizer_json);
  // From parsed JSON (`config` may be null); `source` names it in errors.
  static std::unique_ptr<HfTokenizer> from_json(const nlohmann::json& tokenizer, const nlohmann::json& config,
                                                const std::string& source);
  ~HfTokenizer() override;

  std::vector<int64_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t bos_id() const override;
  int64_t eos_id() const override;
  int64_t pad_id() const override;
  int64_t vocab_size() const override;
  std::vector<int64_t> encode_pieces(const std::vector<std::string_view>& pieces,
                                     std::vector<sdk::PieceRange>& pieces_of_id) const override;
  std::optional<int64_t> token_id(std::string_view token) const override;
  std::string fingerprint() const override;
  const sdk::ChatTemplate* chat_template() const override;

  // The model's own chat template (tokenizer_config.json's Jinja
  // chat_template, jinja_chat_template.h), parsed now; nullopt when the file
  // has none. Throws sdk::ConfigError naming a construct the engine lacks.
  std::optional<sdk::ChatTemplate> own_chat_template() const;
  // tokenizer_config.json's bos_token and eos_token text; empty when not given.
  const std::string& bos_text() const;
  const std::string& eos_text() const;
  void set_chat_template(std::optional<sdk::ChatTemplate> chat_template);

  struct Impl;

 private:
  explicit HfTokenizer(std::unique_ptr<Impl> impl);
  static std::unique_ptr<HfTokenizer> build(const nlohmann::json& tokenizer, const nlohmann::json& config,
                                            const std::string& source, std::string fingerprint);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ptrain::tokenizer
