#include "core/tokenizer/added_tokens.h"

#include "core/tokenizer/utf8.h"

#include <algorithm>
#include <utility>

namespace ptrain::tokenizer::detail {

using nlohmann::json;

namespace {

AddedToken parse_token(const json& entry, size_t index, const JsonSource& file) {
  const std::string where = "key 'added_tokens[" + std::to_string(index) + "]'";
  if (!entry.is_object() || !entry.contains("id") || !entry.at("id").is_number_integer() ||
      !entry.contains("content") || !entry.at("content").is_string()) {
    file.fail(where + ": expected an object with an integer \"id\" and a string \"content\", got " + entry.dump());
  }
  AddedToken token;
  token.id = entry.at("id").get<int64_t>();
  token.content = entry.at("content").get<std::string>();
  token.special = entry.value("special", false);
  token.lstrip = entry.value("lstrip", false);
  token.rstrip = entry.value("rstrip", false);
  token.single_word = entry.value("single_word", false);
  token.normalized = entry.value("normalized", !token.special);
  if (token.id < 0 || token.id >= kMaxTokenIds)
    file.fail(where + ": id " + std::to_string(token.id) + " out of range [0, " + std::to_string(kMaxTokenIds) + ")");
  if (token.content.empty()) file.fail(where + ": empty content");
  return token;
}

// `begin` moved left over the whitespace before it, not past `floor`.
size_t strip_left(std::string_view text, size_t begin, size_t floor) {
  while (begin > floor) {
    const size_t start = previous_codepoint_start(text, begin, floor);
    uint32_t codepoint = 0;
    if (decode_utf8(text, start, codepoint) == 0 || !is_unicode_whitespace(codepoint)) break;
    begin = start;
  }
  return begin;
}

// `end` moved right over the whitespace after it.
size_t strip_right(std::string_view text, size_t end) {
  while (end < text.size()) {
    uint32_t codepoint = 0;
    const size_t length = decode_utf8(text, end, codepoint);
    if (length == 0 || !is_unicode_whitespace(codepoint)) break;
    end += length;
  }
  return end;
}

}  // namespace

void AddedMatcher::index() {
  trie_.assign(1, Node{});
  for (size_t i = 0; i < tokens_.size(); ++i) {
    // A normalizer may turn a token's content into nothing; that never matches.
    if (tokens_[i].content.empty()) continue;
    int32_t node = 0;
    for (const char c : tokens_[i].content) {
      const auto byte = static_cast<unsigned char>(c);
      int32_t next = child(node, byte);
      if (next < 0) {
        next = static_cast<int32_t>(trie_.size());
        auto& children = trie_[node].children;
        children.insert(std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{-1})),
                        {byte, next});
        trie_.emplace_back();
      }
      node = next;
    }
    if (trie_[node].token < 0) trie_[node].token = static_cast<int32_t>(i);  // the first of equal contents wins
  }
}

int32_t AddedMatcher::child(int32_t node, unsigned char byte) const {
  const auto& children = trie_[node].children;
  const auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{-1}));
  return it != children.end() && it->first == byte ? it->second : -1;
}

const AddedToken* AddedMatcher::longest_at(std::string_view text, size_t offset) const {
  const AddedToken* longest = nullptr;
  int32_t node = 0;
  for (size_t i = offset; i < text.size(); ++i) {
    node = child(node, static_cast<unsigned char>(text[i]));
    if (node < 0) break;
    if (trie_[node].token >= 0) longest = &tokens_[trie_[node].token];
  }
  return longest;
}

AddedTokens AddedTokens::load(const json& list, const JsonSource& file, const Normalizer& normalizer,
                              DecodeTable& table) {
  AddedTokens added;
  added.word_char_ = std::make_shared<UnicodeRegex>(R"(\w)", "single_word");
  if (list.is_null()) return added;
  if (!list.is_array()) file.fail("key 'added_tokens': expected an array, got " + json_type(list));
  std::vector<AddedToken> tokens;
  tokens.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) tokens.push_back(parse_token(list[i], i, file));
  for (AddedToken& token : tokens) {
    table.set(token.id, token.content, token.special);
    added.id_by_content_[token.content] = token.id;
    if (token.normalized && !normalizer.empty()) {
      token.content = normalizer.apply(token.content);
      added.normalized_.add(std::move(token));
    } else {
      added.raw_.add(std::move(token));
    }
  }
  added.raw_.index();
  added.normalized_.index();
  return added;
}

std::optional<int64_t> AddedTokens::id_of(std::string_view content) const {
  const auto it = id_by_content_.find(std::string(content));
  if (it != id_by_content_.end()) return it->second;
  return std::nullopt;
}

std::vector<AddedMatch> AddedTokens::find(std::string_view text, const AddedMatcher& matcher) const {
  std::vector<AddedMatch> matches;
  if (matcher.empty()) return matches;
  size_t previous_end = 0;
  size_t i = 0;
  while (i < text.size()) {
    const AddedToken* found = matcher.longest_at(text, i);
    if (!found) {
      ++i;
      continue;
    }
    size_t begin = i, end = i + found->content.size();
    if (found->single_word && touches_word(text, begin, end)) {
      i = end;  // like the `tokenizers` scan, the rejected match is not searched again
      continue;
    }
    if (found->lstrip) begin = strip_left(text, begin, previous_end);
    if (found->rstrip) end = strip_right(text, end);
    matches.push_back({begin, end, found->id});
    previous_end = end;
    i = end;
  }
  return matches;
}

bool AddedTokens::touches_word(std::string_view text, size_t begin, size_t end) const {
  if (begin > 0 && word_char_->matches_at(text, previous_codepoint_start(text, begin, 0))) return true;
  return end < text.size() && word_char_->matches_at(text, end);
}

}  // namespace ptrain::tokenizer::detail
