#include "core/tokenizer/unicode_regex.h"

#include "ptrain/sdk/errors.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstring>

namespace ptrain::tokenizer {

struct UnicodeRegex::Compiled {
  pcre2_code* code = nullptr;
};

namespace {

// Match data sized for the largest pattern this thread has used; one per
// thread so that encode() runs concurrently without locks or allocation.
pcre2_match_data* thread_match_data() {
  struct Holder {
    pcre2_match_data* data = pcre2_match_data_create(32, nullptr);
    ~Holder() { pcre2_match_data_free(data); }
  };
  thread_local Holder holder;
  return holder.data;
}

}  // namespace

UnicodeRegex::UnicodeRegex(const std::string& pattern, const std::string& what)
    : compiled_(new Compiled), what_(what), pattern_(pattern) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  // MATCH_INVALID_UTF: text with invalid UTF-8 is matched piecewise instead of
  // being undefined behaviour (user input on `ptrain tokenize` may be broken).
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                  PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error_code, &error_offset, nullptr);
  if (!compiled_->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof message);
    // The pattern comes from a tokenizer file: a bad one is a configuration error.
    throw sdk::ConfigError(what + ": regex /" + pattern + "/ does not compile at offset " +
                           std::to_string(error_offset) + ": " + reinterpret_cast<const char*>(message));
  }
  // JIT is an optimisation: without it (e.g. a platform PCRE2 lacks it for)
  // the interpreter gives the same matches.
  pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);
}

UnicodeRegex::~UnicodeRegex() {
  if (compiled_ && compiled_->code) pcre2_code_free(compiled_->code);
}

std::vector<std::pair<size_t, size_t>> UnicodeRegex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  pcre2_match_data* data = thread_match_data();
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t offset = 0;
  while (offset <= text.size()) {
    const int rc = pcre2_match(compiled_->code, subject, text.size(), offset, 0, data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      // E.g. PCRE2's match limit on a pattern that backtracks catastrophically:
      // the file's pattern is at fault, not the text.
      throw sdk::ConfigError(what_ + ": regex /" + pattern_ +
                             "/ failed to match: " + reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    const size_t begin = ovector[0], end = ovector[1];
    if (end > begin) {
      matches.emplace_back(begin, end);
      offset = end;
    } else {
      // An empty match: step one code point so the scan advances.
      offset = end + 1;
      while (offset < text.size() && (static_cast<unsigned char>(text[offset]) & 0xC0) == 0x80) ++offset;
    }
  }
  return matches;
}

std::string UnicodeRegex::replace_all(std::string_view text, const std::string& replacement) const {
  std::string out;
  size_t last = 0;
  for (const auto& [begin, end] : find_all(text)) {
    out.append(text.substr(last, begin - last));
    out += replacement;
    last = end;
  }
  out.append(text.substr(last));
  return out;
}

bool UnicodeRegex::matches_at(std::string_view text, size_t offset) const {
  pcre2_match_data* data = thread_match_data();
  const int rc = pcre2_match(compiled_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), offset,
                             PCRE2_ANCHORED, data, nullptr);
  return rc >= 0;
}

std::string escape_regex_literal(const std::string& literal) {
  std::string out;
  for (const char c : literal) {
    if (std::strchr("\\^$.|?*+()[]{}", c) && c != '\0') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace ptrain::tokenizer
