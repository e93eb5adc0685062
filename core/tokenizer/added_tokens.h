// tokenizer.json's "added_tokens": special and user tokens matched in the text
// before anything else, leftmost longest, honouring lstrip, rstrip and
// single_word. A token with normalized = true is matched in the normalized
// text by its normalized form; the others in the raw text.
#pragma once

#include "core/tokenizer/decode_table.h"
#include "core/tokenizer/json_source.h"
#include "core/tokenizer/normalizer.h"
#include "core/tokenizer/unicode_regex.h"

#include <nlohmann/json.hpp>

#include <utility>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ptrain::tokenizer::detail {

struct AddedToken {
  int64_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

// An added token found in a text: [begin, end) includes whitespace taken by lstrip/rstrip.
struct AddedMatch {
  size_t begin = 0;
  size_t end = 0;
  int64_t id = 0;
};

// Added tokens of one kind (matched on raw or on normalized text) in a byte
// trie, so finding the longest at an offset costs the length of the match,
// not the number of tokens (Gemma 3 has 6322 beginning with '<').
class AddedMatcher {
 public:
  void add(AddedToken token) { tokens_.push_back(std::move(token)); }
  void index();  // after the last add()
  bool empty() const { return tokens_.empty(); }
  // The longest token that `text` has at `offset`, if any.
  const AddedToken* longest_at(std::string_view text, size_t offset) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    int32_t token = -1;                                       // index into tokens_ of the token ending here
  };
  int32_t child(int32_t node, unsigned char byte) const;  // -1 when there is none

  std::vector<AddedToken> tokens_;
  std::vector<Node> trie_;  // trie_[0] is the root
};

class AddedTokens {
 public:
  // `list` is tokenizer.json's "added_tokens" (null: none); each token's
  // content goes into `table` under its id, replacing the vocabulary's.
  static AddedTokens load(const nlohmann::json& list, const JsonSource& file, const Normalizer& normalizer,
                          DecodeTable& table);

  // The id of the added token with exactly this content.
  std::optional<int64_t> id_of(std::string_view content) const;

  // Matches in the raw text, and in the normalized text.
  std::vector<AddedMatch> find_raw(std::string_view text) const { return find(text, raw_); }
  std::vector<AddedMatch> find_normalized(std::string_view text) const { return find(text, normalized_); }

 private:
  std::vector<AddedMatch> find(std::string_view text, const AddedMatcher& matcher) const;
  // Whether a word character touches text[begin, end) on either side.
  bool touches_word(std::string_view text, size_t begin, size_t end) const;

  std::unordered_map<std::string, int64_t> id_by_content_;
  AddedMatcher raw_, normalized_;
  std::shared_ptr<UnicodeRegex> word_char_;  // \w, for single_word
};

}  // namespace ptrain::tokenizer::detail
