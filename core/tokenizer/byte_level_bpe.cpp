#include "core/tokenizer/byte_level_bpe.h"

#include "core/tokenizer/bpe_merge_list.h"
#include "core/tokenizer/utf8.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>

namespace ptrain::tokenizer::detail {

using nlohmann::json;

namespace {

// Words longer than this skip the per-thread word cache (as in `tokenizers`).
constexpr size_t kMaxCachedWordBytes = 256;
constexpr size_t kMaxCachedWords = 1 << 17;
constexpr int32_t kNoRank = INT32_MAX;

std::atomic<uint64_t> next_instance{1};

// A vocabulary token in the byte-level alphabet → its raw bytes; nullopt if
// it has a character outside that alphabet (then BPE never produces it).
std::optional<std::string> alphabet_to_bytes(const std::string& token) {
  static const auto codepoint_to_byte = [] {
    std::unordered_map<uint32_t, uint8_t> inverse;
    const auto table = byte_to_codepoint();
    for (uint32_t b = 0; b < 256; ++b) inverse[table[b]] = static_cast<uint8_t>(b);
    return inverse;
  }();
  std::string bytes;
  for (size_t i = 0; i < token.size();) {
    uint32_t codepoint = 0;
    const size_t length = decode_utf8(token, i, codepoint);
    if (length == 0) return std::nullopt;
    const auto it = codepoint_to_byte.find(codepoint);
    if (it == codepoint_to_byte.end()) return std::nullopt;
    bytes.push_back(static_cast<char>(it->second));
    i += length;
  }
  return bytes;
}

void check_options(const json& model, const JsonSource& file) {
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model.at(key).is_string() && !model.at(key).get<std::string>().empty())
      file.fail(std::string("model.") + key + " is not supported (byte-level BPE files leave it empty)");
  }
  if (model.contains("dropout") && model.at("dropout").is_number() && model.at("dropout").get<double>() > 0.0)
    file.fail("model.dropout > 0 is not supported: BPE dropout randomises tokenization, which training data must not");
}

// Words already encoded, on this thread, by the model `owner`.
struct WordCache {
  uint64_t owner = 0;
  std::unordered_map<std::string, std::vector<int32_t>> words;
};

WordCache& thread_word_cache(uint64_t owner) {
  thread_local WordCache cache;
  if (cache.owner != owner) {
    cache.words.clear();
    cache.owner = owner;
  }
  return cache;
}

}  // namespace

ByteLevelBpe::ByteLevelBpe() : instance_(next_instance.fetch_add(1)) {}

std::unique_ptr<ByteLevelBpe> ByteLevelBpe::load(const json& model, const JsonSource& file, DecodeTable& table) {
  check_options(model, file);
  std::unique_ptr<ByteLevelBpe> bpe(new ByteLevelBpe());
  bpe->ignore_merges_ = model.value("ignore_merges", false);
  bpe->load_vocab(model.contains("vocab") ? model.at("vocab") : json(), file, table);
  bpe->load_merges(model.contains("merges") ? model.at("merges") : json(), file);
  return bpe;
}

void ByteLevelBpe::load_vocab(const json& vocab, const JsonSource& file, DecodeTable& table) {
  if (!vocab.is_object()) file.fail("key 'model.vocab': expected an object of token → id, got " + json_type(vocab));
  bytes_to_id_.reserve(vocab.size() * 2);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const auto fail_entry = [&](const std::string& what) {
      file.fail("key 'model.vocab' entry \"" + it.key() + "\": " + what);
    };
    if (!it.value().is_number_integer()) fail_entry("expected an integer id, got " + json_type(it.value()));
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || id >= kMaxTokenIds)
      fail_entry("id " + std::to_string(id) + " out of range [0, " + std::to_string(kMaxTokenIds) + ")");
    const auto bytes = alphabet_to_bytes(it.key());
    table.set(id, bytes ? *bytes : it.key(), false);
    if (!bytes) continue;
    bytes_to_id_.emplace(*bytes, static_cast<int32_t>(id));
    if (id_bytes_.size() <= static_cast<size_t>(id)) id_bytes_.resize(static_cast<size_t>(id) + 1, 0);
    id_bytes_[static_cast<size_t>(id)] = static_cast<uint32_t>(bytes->size());
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = bytes_to_id_.find(std::string(1, static_cast<char>(b)));
    if (it == bytes_to_id_.end()) {
      char text[8];
      std::snprintf(text, sizeof text, "0x%02X", b);
      file.fail(std::string("key 'model.vocab' has no token for byte ") + text +
                "; a byte-level BPE vocabulary holds all 256 bytes");
    }
    byte_id_[b] = it->second;
  }
}

void ByteLevelBpe::load_merges(const json& list, const JsonSource& file) {
  if (!list.is_array()) file.fail("key 'model.merges': expected an array, got " + json_type(list));
  merges_.reserve(list.size() * 2);
  for (size_t rank = 0; rank < list.size(); ++rank) {
    const auto [left, right] = parse_merge(list[rank], rank, file);
    const auto left_bytes = alphabet_to_bytes(left), right_bytes = alphabet_to_bytes(right);
    const int32_t left_id = find_id(left_bytes), right_id = find_id(right_bytes);
    const int32_t merged_id = left_bytes && right_bytes ? find_id(*left_bytes + *right_bytes) : -1;
    if (left_id < 0 || right_id < 0 || merged_id < 0) {
      file.fail("key 'model.merges[" + std::to_string(rank) + "]': \"" + left + "\" + \"" + right + "\": " +
                (left_id < 0    ? "\"" + left + "\""
                 : right_id < 0 ? "\"" + right + "\""
                                : "the merged token") +
                " is not in the vocabulary");
    }
    const uint64_t key = (static_cast<uint64_t>(left_id) << 32) | static_cast<uint32_t>(right_id);
    merges_.emplace(key, std::make_pair(static_cast<int32_t>(rank), merged_id));  // the first (lowest) rank wins
  }
}

int32_t ByteLevelBpe::find_id(const std::optional<std::string>& bytes) const {
  if (!bytes) return -1;
  const auto it = bytes_to_id_.find(*bytes);
  return it == bytes_to_id_.end() ? -1 : it->second;
}

std::optional<int64_t> ByteLevelBpe::token_id(const std::string& bytes) const {
  const auto it = bytes_to_id_.find(bytes);
  if (it != bytes_to_id_.end()) return it->second;
  return std::nullopt;
}

void ByteLevelBpe::encode_word(std::string_view word, std::vector<int64_t>& ids, std::vector<size_t>* ends) const {
  const size_t before = ids.size();
  append_ids(word, ids);
  if (!ends) return;
  // Each id stands for its token's bytes, and the tokens concatenate to the word.
  size_t end = 0;
  for (size_t i = before; i < ids.size(); ++i) {
    end += id_bytes_[static_cast<size_t>(ids[i])];
    ends->push_back(end);
  }
}

void ByteLevelBpe::append_ids(std::string_view word, std::vector<int64_t>& ids) const {
  if (word.empty()) return;
  if (ignore_merges_ || word.size() == 1) {
    const auto it = bytes_to_id_.find(std::string(word));
    if (it != bytes_to_id_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() < kMaxCachedWordBytes;
  WordCache* cache = cacheable ? &thread_word_cache(instance_) : nullptr;
  if (cache) {
    const auto it = cache->words.find(std::string(word));
    if (it != cache->words.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> symbols = merge(word);
  ids.insert(ids.end(), symbols.begin(), symbols.end());
  if (cache) {
    if (cache->words.size() >= kMaxCachedWords) cache->words.clear();
    cache->words.emplace(std::string(word), std::move(symbols));
  }
}

// Repeatedly merges the adjacent pair of lowest rank (leftmost on ties), as
// `tokenizers` does with its priority queue; words are short, so a linear
// scan over cached pair ranks is fast.
std::vector<int32_t> ByteLevelBpe::merge(std::string_view word) const {
  std::vector<int32_t> symbols(word.size());
  for (size_t i = 0; i < word.size(); ++i) symbols[i] = byte_id_[static_cast<unsigned char>(word[i])];
  // ranks[i], merged_ids[i]: merging symbols i and i + 1.
  std::vector<int32_t> ranks(symbols.size(), kNoRank), merged_ids(symbols.size(), -1);
  for (size_t i = 0; i + 1 < symbols.size(); ++i) ranks[i] = pair_rank(symbols[i], symbols[i + 1], merged_ids[i]);
  while (symbols.size() > 1) {
    const size_t best = static_cast<size_t>(std::min_element(ranks.begin(), ranks.end() - 1) - ranks.begin());
    if (ranks[best] == kNoRank) break;
    symbols[best] = merged_ids[best];
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    ranks.erase(ranks.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    merged_ids.erase(merged_ids.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    ranks[best] = best + 1 < symbols.size() ? pair_rank(symbols[best], symbols[best + 1], merged_ids[best]) : kNoRank;
    if (best > 0) ranks[best - 1] = pair_rank(symbols[best - 1], symbols[best], merged_ids[best - 1]);
  }
  return symbols;
}

int32_t ByteLevelBpe::pair_rank(int32_t left, int32_t right, int32_t& merged) const {
  const auto it = merges_.find((static_cast<uint64_t>(left) << 32) | static_cast<uint32_t>(right));
  if (it == merges_.end()) return kNoRank;
  merged = it->second.second;
  return it->second.first;
}

}  // namespace ptrain::tokenizer::detail
