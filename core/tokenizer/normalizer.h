// tokenizer.json's "normalizer": NFC, NFD, NFKC, NFKD (via utf8proc),
// Lowercase, Replace (a regex or literal), Prepend, and Sequences of them,
// applied in file order before pre-tokenization.
#pragma once

#include "core/tokenizer/json_source.h"
#include "core/tokenizer/unicode_regex.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ptrain::tokenizer::detail {

class Normalizer {
 public:
  // `node` is tokenizer.json's "normalizer" (null: none). Throws naming the
  // key of an unsupported or malformed step.
  static Normalizer load(const nlohmann::json& node, const JsonSource& file);

  bool empty() const { return steps_.empty(); }
  // `section_start`: `text` begins a section between added tokens (else it
  // continues one, normalized piece by piece): only there does Prepend add
  // its prefix, since the library normalizes each section as a whole.
  std::string apply(std::string_view text, bool section_start = true) const;

 private:
  struct Step {
    enum class Kind { kNfc, kNfd, kNfkc, kNfkd, kLowercase, kReplace, kPrepend };
    Kind kind = Kind::kNfc;
    std::shared_ptr<UnicodeRegex> pattern;  // kReplace
    std::string content;                    // kReplace: replacement; kPrepend: prefix
  };

  // Appends the step(s) of `node`, found at key `where`.
  void add(const nlohmann::json& node, const std::string& where, const JsonSource& file);
  static Step replace_step(const nlohmann::json& node, const std::string& where, const JsonSource& file);
  static void apply_step(const Step& step, std::string& text, bool section_start);

  std::vector<Step> steps_;
};

}  // namespace ptrain::tokenizer::detail
