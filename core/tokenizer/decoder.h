// tokenizer.json's "decoder": how a list of token strings becomes text.
// ByteLevel (byte-level BPE: the decode table already holds each token's raw
// bytes, so the tokens are concatenated) or a chain of the SentencePiece-style
// steps, each applied to the whole token list in file order, as the
// `tokenizers` library's decode_chain does:
//   Replace     replaces a pattern (a literal or a regex) in every token
//   ByteFallback  turns each run of `<0xNN>` tokens into the text of those
//               bytes; a run that is not valid UTF-8 gives one U+FFFD per byte
//   Fuse        joins all tokens into one
//   Strip       removes up to `start` leading and `stop` trailing `content`
//               characters from every token
// and Sequences of them. With no decoder, tokens are joined with spaces.
#pragma once

#include "core/tokenizer/json_source.h"
#include "core/tokenizer/unicode_regex.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ptrain::tokenizer::detail {

class Decoder {
 public:
  // `node` is tokenizer.json's "decoder" (null: none). Throws naming the key
  // of an unsupported or malformed step.
  static Decoder load(const nlohmann::json& node, const JsonSource& file);

  bool byte_level() const { return byte_level_; }
  bool empty() const { return steps_.empty() && !byte_level_; }

  // The text of `tokens` (not byte-level).
  std::string decode(std::vector<std::string> tokens) const;

 private:
  struct Step {
    enum class Kind { kReplace, kByteFallback, kFuse, kStrip };
    Kind kind = Kind::kFuse;
    std::shared_ptr<UnicodeRegex> pattern;  // kReplace
    std::string content;                    // kReplace: replacement; kStrip: the character stripped
    size_t start = 0;                       // kStrip
    size_t stop = 0;                        // kStrip
  };

  // Appends the step(s) of `node`, found at key `where`.
  void add(const nlohmann::json& node, const std::string& where, const JsonSource& file);
  static Step replace_step(const nlohmann::json& node, const std::string& where, const JsonSource& file);
  static Step strip_step(const nlohmann::json& node, const std::string& where, const JsonSource& file);
  static void apply(const Step& step, std::vector<std::string>& tokens);

  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace ptrain::tokenizer::detail
