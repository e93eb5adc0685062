#include "core/tokenizer/sentencepiece_bpe.h"

#include "core/tokenizer/bpe_merge_list.h"
#include "core/tokenizer/utf8.h"

#include <algorithm>
#include <cstdio>
#include <queue>

namespace ptrain::tokenizer::detail {

using nlohmann::json;

namespace {

// A symbol of the word being merged, in a doubly linked list over the initial symbols.
struct Symbol {
  int32_t id = 0;
  uint32_t bytes = 0;  // of the word
  int32_t prev = -1;
  int32_t next = -1;
  bool merged_away = false;  // became part of the symbol before it
};

// Merging the symbol at `position` with the one after it, queued by (rank, position).
struct Candidate {
  int32_t rank = 0;
  int32_t position = 0;
  int32_t left = 0;  // the ids it was queued for: a changed neighbour makes it stale
  int32_t right = 0;
  int32_t merged = 0;

  bool operator>(const Candidate& other) const {
    return rank != other.rank ? rank > other.rank : position > other.position;
  }
};

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

void check_options(const json& model, const JsonSource& file) {
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model.at(key).is_string() && !model.at(key).get<std::string>().empty())
      file.fail(std::string("key 'model.") + key + "' is not supported (SentencePiece-style BPE files leave it null)");
  }
  if (model.contains("dropout") && model.at("dropout").is_number() && model.at("dropout").get<double>() > 0.0)
    file.fail(
        "key 'model.dropout' > 0 is not supported: BPE dropout randomises tokenization, which training data "
        "must not");
}

}  // namespace

std::unique_ptr<SentencePieceBpe> SentencePieceBpe::load(const json& model, const JsonSource& file,
                                                         DecodeTable& table) {
  check_options(model, file);
  std::unique_ptr<SentencePieceBpe> bpe(new SentencePieceBpe());
  bpe->byte_fallback_ = model.value("byte_fallback", false);
  bpe->fuse_unk_ = model.value("fuse_unk", false);
  bpe->ignore_merges_ = model.value("ignore_merges", false);
  bpe->load_vocab(model.contains("vocab") ? model.at("vocab") : json(), file, table);
  bpe->load_merges(model.contains("merges") ? model.at("merges") : json(), file);
  bpe->load_unknown(model, file);
  return bpe;
}

void SentencePieceBpe::load_vocab(const json& vocab, const JsonSource& file, DecodeTable& table) {
  if (!vocab.is_object()) file.fail("key 'model.vocab': expected an object of token → id, got " + json_type(vocab));
  token_to_id_.reserve(vocab.size() * 2);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer())
      file.fail("key 'model.vocab' entry \"" + it.key() + "\": expected an integer id, got " + json_type(it.value()));
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || id >= kMaxTokenIds) {
      file.fail("key 'model.vocab' entry \"" + it.key() + "\": id " + std::to_string(id) + " out of range [0, " +
                std::to_string(kMaxTokenIds) + ")");
    }
    table.set(id, it.key(), false);
    token_to_id_.emplace(it.key(), static_cast<int32_t>(id));
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    const auto it = token_to_id_.find(name);
    byte_id_[b] = it == token_to_id_.end() ? -1 : it->second;
  }
}

void SentencePieceBpe::load_merges(const json& list, const JsonSource& file) {
  if (!list.is_array()) file.fail("key 'model.merges': expected an array, got " + json_type(list));
  merges_.reserve(list.size() * 2);
  const auto id_of = [&](const std::string& token) {
    const auto it = token_to_id_.find(token);
    return it == token_to_id_.end() ? -1 : it->second;
  };
  for (size_t rank = 0; rank < list.size(); ++rank) {
    const auto [left, right] = parse_merge(list[rank], rank, file);
    const int32_t left_id = id_of(left), right_id = id_of(right), merged_id = id_of(left + right);
    if (left_id < 0 || right_id < 0 || merged_id < 0) {
      file.fail("key 'model.merges[" + std::to_string(rank) + "]': \"" + left + "\" + \"" + right + "\": " +
                (left_id < 0    ? "\"" + left + "\""
                 : right_id < 0 ? "\"" + right + "\""
                                : "the merged token \"" + left + right + "\"") +
                " is not in the vocabulary");
    }
    merges_.emplace(pair_key(left_id, right_id), std::make_pair(static_cast<int32_t>(rank), merged_id));
  }
}

void SentencePieceBpe::load_unknown(const json& model, const JsonSource& file) {
  const json& unk = model.contains("unk_token") ? model.at("unk_token") : json();
  if (unk.is_string()) {
    const auto it = token_to_id_.find(unk.get<std::string>());
    if (it == token_to_id_.end())
      file.fail("key 'model.unk_token': \"" + unk.get<std::string>() + "\" is not in the vocabulary");
    unk_id_ = it->second;
  } else if (!unk.is_null()) {
    file.fail("key 'model.unk_token': expected a string or null, got " + json_type(unk));
  }
  if (!byte_fallback_ && unk_id_ < 0) {
    file.fail(
        "key 'model': a BPE model without a ByteLevel pre-tokenizer needs byte_fallback = true or an unk_token "
        "(else a character outside the vocabulary could not be encoded)");
  }
}

std::optional<int64_t> SentencePieceBpe::token_id(const std::string& text) const {
  const auto it = token_to_id_.find(text);
  if (it != token_to_id_.end()) return it->second;
  return std::nullopt;
}

void SentencePieceBpe::encode_word(std::string_view word, std::vector<int64_t>& ids, std::vector<size_t>* ends) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    const auto it = token_to_id_.find(std::string(word));
    if (it != token_to_id_.end()) {
      ids.push_back(it->second);
      if (ends) ends->push_back(word.size());
      return;
    }
  }
  std::vector<int32_t> symbols;
  std::vector<uint32_t> bytes;
  initial_symbols(word, symbols, bytes);
  merge(symbols, bytes);
  ids.insert(ids.end(), symbols.begin(), symbols.end());
  if (!ends) return;
  size_t end = 0;
  for (const uint32_t count : bytes) ends->push_back(end += count);
}

// A byte that is not valid UTF-8 counts as a character of its own, which only
// its byte token (or unk) can encode.
void SentencePieceBpe::initial_symbols(std::string_view word, std::vector<int32_t>& symbols,
                                       std::vector<uint32_t>& bytes) const {
  symbols.reserve(word.size());
  bytes.reserve(word.size());
  std::string character;
  uint32_t unk_bytes = 0;  // of the unknown characters not yet pushed as unk
  const auto push = [&](int32_t id, uint32_t count) {
    symbols.push_back(id);
    bytes.push_back(count);
  };
  for (size_t i = 0; i < word.size();) {
    uint32_t codepoint = 0;
    const size_t length = std::max<size_t>(decode_utf8(word, i, codepoint), 1);
    character.assign(word.substr(i, length));
    i += length;
    const auto it = token_to_id_.find(character);
    bool bytes_known = byte_fallback_;
    for (size_t b = 0; bytes_known && b < character.size(); ++b)
      bytes_known = byte_id_[static_cast<unsigned char>(character[b])] >= 0;
    if (it != token_to_id_.end() || bytes_known) {
      if (unk_bytes > 0) push(unk_id_, unk_bytes);
      unk_bytes = 0;
      if (it != token_to_id_.end()) {
        push(it->second, static_cast<uint32_t>(length));
      } else {
        for (const char byte : character) push(byte_id_[static_cast<unsigned char>(byte)], 1);
      }
    } else {
      if (unk_bytes > 0 && !fuse_unk_) {
        push(unk_id_, unk_bytes);
        unk_bytes = 0;
      }
      unk_bytes += static_cast<uint32_t>(length);
    }
  }
  if (unk_bytes > 0) push(unk_id_, unk_bytes);
}

void SentencePieceBpe::merge(std::vector<int32_t>& ids, std::vector<uint32_t>& bytes) const {
  if (ids.size() < 2) return;
  std::vector<Symbol> symbols(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    symbols[i].id = ids[i];
    symbols[i].bytes = bytes[i];
    symbols[i].prev = static_cast<int32_t>(i) - 1;
    symbols[i].next = i + 1 < ids.size() ? static_cast<int32_t>(i) + 1 : -1;
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  const auto consider = [&](int32_t position) {
    if (position < 0 || symbols[position].next < 0) return;
    const int32_t left = symbols[position].id, right = symbols[symbols[position].next].id;
    const auto it = merges_.find(pair_key(left, right));
    if (it != merges_.end()) queue.push({it->second.first, position, left, right, it->second.second});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) consider(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.position];
    if (left.merged_away || left.next < 0 || left.id != top.left || symbols[left.next].id != top.right) continue;
    Symbol& right = symbols[left.next];
    right.merged_away = true;
    left.id = top.merged;
    left.bytes += right.bytes;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.position;
    consider(left.prev);
    consider(top.position);
  }
  ids.clear();
  bytes.clear();
  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    ids.push_back(symbols[i].id);
    bytes.push_back(symbols[i].bytes);
  }
}

}  // namespace ptrain::tokenizer::detail
