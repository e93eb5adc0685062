// tokenizer.json's "pre_tokenizer": Split (the file's regex, via PCRE2),
// Digits, ByteLevel (GPT-2's regex and add_prefix_space), Metaspace (as the
// first step; metaspace.h), and Sequences of them. Each step splits every span
// the previous one left; the model then encodes each span on its own.
#pragma once

#include "core/tokenizer/json_source.h"
#include "core/tokenizer/metaspace.h"
#include "core/tokenizer/unicode_regex.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ptrain::tokenizer::detail {

// A span of the normalized text; `prefix_space` marks a space a ByteLevel
// pre-tokenizer with add_prefix_space put before it.
struct Span {
  size_t begin = 0;
  size_t end = 0;
  bool prefix_space = false;
};

// Where a Split step's matches (the delimiters) go, as the `tokenizers` library names it.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  // `node` is tokenizer.json's "pre_tokenizer" (null: none). Throws naming
  // the key of an unsupported or malformed step.
  static PreTokenizer load(const nlohmann::json& node, const JsonSource& file);

  bool has_byte_level() const;
  // The Metaspace step, if the pre-tokenizer starts with one: the caller
  // rewrites each segment with it before split() runs the other steps.
  const Metaspace* metaspace() const { return has_metaspace_ ? &metaspace_ : nullptr; }

  // Splits every span by each step in order. `text` is the normalized text
  // the spans index.
  void split(std::string_view text, std::vector<Span>& spans) const;

 private:
  struct Step {
    enum class Kind { kSplit, kByteLevel, kDigits };
    Kind kind = Kind::kSplit;
    std::shared_ptr<UnicodeRegex> pattern;  // kSplit, kByteLevel with use_regex
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;   // kByteLevel
    bool individual_digits = false;  // kDigits
  };

  // Appends the step(s) of `node`, found at key `where`.
  void add(const nlohmann::json& node, const std::string& where, const JsonSource& file);
  static Step split_step(const nlohmann::json& node, const std::string& where, const JsonSource& file);
  void add_metaspace(const nlohmann::json& node, const std::string& where, const JsonSource& file);
  // Adds the pieces `step` cuts `span` into to `out`; `buffer` is scratch space.
  static void split_span(const Step& step, std::string_view text, const Span& span, std::string& buffer,
                         std::vector<Span>& out);

  std::vector<Step> steps_;
  Metaspace metaspace_;
  bool has_metaspace_ = false;
};

}  // namespace ptrain::tokenizer::detail
