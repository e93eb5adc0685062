// A PCRE2 regular expression compiled for UTF-8 with Unicode properties
// (\p{L}, \p{N}, Unicode \s), JIT-compiled when the platform allows. Used by
// tokenizer.json pre-tokenizers and normalizers, whose patterns are written
// for Oniguruma; the subset those files use means the same in PCRE2.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ptrain::tokenizer {

class UnicodeRegex {
 public:
  // Throws sdk::ConfigError naming `what` (e.g. "tokenizer.json: pre_tokenizer Split")
  // and PCRE2's message with the offset when the pattern does not compile;
  // find_all throws one too when matching fails (e.g. PCRE2's match limit).
  UnicodeRegex(const std::string& pattern, const std::string& what);
  ~UnicodeRegex();
  UnicodeRegex(const UnicodeRegex&) = delete;
  UnicodeRegex& operator=(const UnicodeRegex&) = delete;

  // Every non-overlapping match in `text`, left to right, as [begin, end) byte
  // offsets. Empty matches are skipped. Thread-safe.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

  // `text` with every match of find_all replaced by `replacement`.
  std::string replace_all(std::string_view text, const std::string& replacement) const;

  // Whether the pattern matches at exactly `offset` (anchored).
  bool matches_at(std::string_view text, size_t offset) const;

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
  std::string what_;
  std::string pattern_;
};

// `literal` with PCRE2's metacharacters escaped, so that it matches itself
// (tokenizer.json's {"String": ...} patterns).
std::string escape_regex_literal(const std::string& literal);

}  // namespace ptrain::tokenizer
