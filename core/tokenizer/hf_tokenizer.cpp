#include "core/tokenizer/hf_tokenizer.h"

#include "ptrain/sdk/fingerprint.h"

#include "core/tokenizer/unicode_regex.h"
#include "ptrain/sdk/errors.h"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>
#include <unordered_map>

namespace ptrain::tokenizer {

using nlohmann::json;

namespace {

// GPT-2's ByteLevel split, as the `tokenizers` ByteLevel pre-tokenizer has it built in.
const char* const kByteLevelPattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Words longer than this skip the per-thread BPE cache (as in `tokenizers`).
constexpr size_t kMaxCachedWordBytes = 256;
constexpr size_t kMaxCachedWords = 1 << 17;
// Token ids index dense tables, so an id bounds memory: 2^22 (4.2M) is well
// above the largest vocabularies in use (~256K) and keeps a corrupt or hostile
// id from allocating gigabytes (the fuzzer found 2^30 ids → 8 GB).
constexpr int64_t kMaxTokenIds = int64_t{1} << 22;

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves,
// the other 68 bytes for code points 256, 257, ... in byte order.
std::array<uint32_t, 256> byte_to_codepoint() {
  std::array<uint32_t, 256> table{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    table[b] = printable ? b : next++;
  }
  return table;
}

// Decodes one UTF-8 code point at text[i]; returns its length (0 when invalid).
size_t decode_utf8(std::string_view text, size_t i, uint32_t& codepoint) {
  utf8proc_int32_t value = 0;
  const utf8proc_ssize_t length = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + i),
                                                   static_cast<utf8proc_ssize_t>(text.size() - i), &value);
  if (length <= 0) return 0;
  codepoint = static_cast<uint32_t>(value);
  return static_cast<size_t>(length);
}

void append_utf8(std::string& out, uint32_t codepoint) {
  utf8proc_uint8_t buffer[4];
  const utf8proc_ssize_t length = utf8proc_encode_char(static_cast<utf8proc_int32_t>(codepoint), buffer);
  out.append(reinterpret_cast<const char*>(buffer), static_cast<size_t>(length));
}

// Replaces invalid UTF-8 with U+FFFD, one per maximal invalid subpart (the
// WHATWG rule that Rust's from_utf8_lossy and JavaScript's TextDecoder share).
std::string lossy_utf8(const std::string& bytes) {
  std::string out;
  out.reserve(bytes.size());
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    size_t need = 0;
    unsigned char lower = 0x80, upper = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      need = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      need = 2;
      if (c == 0xE0) lower = 0xA0;
      if (c == 0xED) upper = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      need = 3;
      if (c == 0xF0) lower = 0x90;
      if (c == 0xF4) upper = 0x8F;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    size_t j = 1;
    for (; j <= need && i + j < n; ++j) {
      const unsigned char next = s[i + j];
      if (next < lower || next > upper) break;
      lower = 0x80;
      upper = 0xBF;
    }
    if (j == need + 1) {
      out.append(bytes, i, need + 1);
    } else {
      out += "\xEF\xBF\xBD";
    }
    i += j == need + 1 ? need + 1 : j;
  }
  return out;
}

bool is_unicode_whitespace(uint32_t c) {
  // The White_Space property (Unicode 15), which Rust's trim and Oniguruma's \s use.
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Escapes a literal for PCRE2 (Split with {"String": ...}).
std::string regex_escape(const std::string& literal) {
  std::string out;
  for (const char c : literal) {
    if (std::strchr("\\^$.|?*+()[]{}", c) && c != '\0') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

std::string json_type(const json& value) { return value.type_name(); }

// tokenizer_config.json writes special tokens as "text" or {"content": "text", ...}.
std::optional<std::string> token_text(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value.at("content").is_string())
    return value.at("content").get<std::string>();
  return std::nullopt;
}

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct NormalizerStep {
  enum class Kind { kNfc, kNfd, kNfkc, kNfkd, kLowercase, kReplace, kPrepend };
  Kind kind = Kind::kNfc;
  std::shared_ptr<UnicodeRegex> pattern;  // kReplace
  std::string content;                    // kReplace: replacement; kPrepend: prefix
};

struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel, kDigits };
  Kind kind = Kind::kSplit;
  std::shared_ptr<UnicodeRegex> pattern;  // kSplit, kByteLevel with use_regex
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  bool add_prefix_space = false;   // kByteLevel
  bool individual_digits = false;  // kDigits
};

struct AddedToken {
  int64_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

// A span of the normalized text; `prefix_space` marks a space a ByteLevel
// pre-tokenizer with add_prefix_space put before it.
struct Span {
  size_t begin = 0;
  size_t end = 0;
  bool prefix_space = false;
};

// An added token found in a text: [begin, end) includes whitespace taken by lstrip/rstrip.
struct AddedMatch {
  size_t begin = 0;
  size_t end = 0;
  int64_t id = 0;
};

// Added tokens of one kind (matched on raw or on normalized text), indexed by first byte.
struct AddedMatcher {
  std::vector<const AddedToken*> tokens;
  std::array<std::vector<const AddedToken*>, 256> by_first_byte;  // longest first
  void build() {
    for (const AddedToken* token : tokens) {
      if (!token->content.empty()) by_first_byte[static_cast<unsigned char>(token->content[0])].push_back(token);
    }
    for (auto& list : by_first_byte) {
      std::stable_sort(list.begin(), list.end(),
                       [](const AddedToken* a, const AddedToken* b) { return a->content.size() > b->content.size(); });
    }
  }
  bool empty() const { return tokens.empty(); }
};

std::atomic<uint64_t> next_instance{1};

}  // namespace

struct HfTokenizer::Impl {
  std::string source;
  uint64_t instance = next_instance.fetch_add(1);
  std::string fingerprint;

  std::vector<NormalizerStep> normalizer;
  std::vector<PreTokenizerStep> pre_tokenizer;
  std::shared_ptr<UnicodeRegex> word_char;  // \w, for single_word

  // BPE over bytes: vocabulary entries converted from the byte-level alphabet.
  std::unordered_map<std::string, int32_t> bytes_to_id;
  std::array<int32_t, 256> byte_id{};
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;  // (left << 32 | right) → (rank, merged id)
  bool ignore_merges = false;

  std::vector<std::string> id_to_bytes;  // decode: raw bytes of each id (added tokens: their content)
  std::vector<uint8_t> is_special;       // by id: skipped when decoding
  std::vector<AddedToken> added;
  std::unordered_map<std::string, int64_t> added_by_content;
  AddedMatcher raw_added, normalized_added;
  std::deque<AddedToken> normalized_forms;  // normalized_added points here (a deque never moves its elements)

  int64_t bos = -1, eos = -1, pad = -1;
  int64_t vocab_size = 0;
  std::string detected_template;
  std::optional<sdk::ChatTemplate> chat_template;

  [[noreturn]] void fail(const std::string& message) const { throw sdk::ConfigError(source + ": " + message); }

  void load_model(const json& model);
  void load_added_tokens(const json& list);
  void load_normalizer(const json& node, const std::string& where);
  void load_pre_tokenizer(const json& node, const std::string& where);
  void check_decoder(const json& node) const;
  void load_config(const json& config);

  std::string normalize(std::string_view text) const;
  std::vector<AddedMatch> find_added(std::string_view text, const AddedMatcher& matcher) const;
  void pre_tokenize(std::string_view text, std::vector<Span>& spans) const;
  void bpe(std::string_view word, std::vector<int64_t>& ids) const;
  void encode_text(std::string_view text, const std::vector<size_t>* piece_starts, std::vector<int64_t>& ids,
                   std::vector<size_t>* piece_of_id) const;
  void encode_normalized_section(std::string_view text, size_t offset, const std::vector<size_t>& chunk_starts,
                                 const std::vector<size_t>& chunk_piece, std::vector<int64_t>& ids,
                                 std::vector<size_t>* piece_of_id) const;
};

void HfTokenizer::Impl::load_model(const json& model) {
  if (!model.is_object()) fail("key 'model': expected an object, got " + json_type(model));
  const std::string type = model.value("type", "");
  if (type != "BPE") {
    fail("model type '" + (type.empty() ? std::string("(none)") : type) +
         "' is not supported: ptrain reads byte-level BPE tokenizers (GPT-2, Llama 3, Qwen, SmolLM), not Unigram, "
         "WordPiece or WordLevel");
  }
  if (model.value("byte_fallback", false)) {
    fail(
        "model.byte_fallback = true (SentencePiece-style BPE, e.g. Llama 2 or Mistral) is not supported; only "
        "byte-level BPE is");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model.at(key).is_string() && !model.at(key).get<std::string>().empty())
      fail(std::string("model.") + key + " is not supported (byte-level BPE files leave it empty)");
  }
  if (model.contains("dropout") && model.at("dropout").is_number() && model.at("dropout").get<double>() > 0.0)
    fail("model.dropout > 0 is not supported: BPE dropout randomises tokenization, which training data must not");
  ignore_merges = model.value("ignore_merges", false);

  const json& vocab = model.contains("vocab") ? model.at("vocab") : json();
  if (!vocab.is_object()) fail("key 'model.vocab': expected an object of token → id, got " + json_type(vocab));
  std::unordered_map<uint32_t, uint8_t> codepoint_to_byte;
  const auto table = byte_to_codepoint();
  for (uint32_t b = 0; b < 256; ++b) codepoint_to_byte[table[b]] = static_cast<uint8_t>(b);

  // A vocabulary token in the byte-level alphabet → its raw bytes; nullopt if
  // it has a character outside that alphabet (then BPE never produces it).
  const auto to_bytes = [&](const std::string& token) -> std::optional<std::string> {
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
  };

  bytes_to_id.reserve(vocab.size() * 2);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer())
      fail("key 'model.vocab' entry \"" + it.key() + "\": expected an integer id, got " + json_type(it.value()));
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || id >= kMaxTokenIds)
      fail("key 'model.vocab' entry \"" + it.key() + "\": id " + std::to_string(id) + " out of range [0, " +
           std::to_string(kMaxTokenIds) + ")");
    if (static_cast<size_t>(id) >= id_to_bytes.size()) id_to_bytes.resize(id + 1);
    const auto bytes = to_bytes(it.key());
    id_to_bytes[id] = bytes ? *bytes : it.key();
    if (bytes) bytes_to_id.emplace(*bytes, static_cast<int32_t>(id));
    vocab_size = std::max(vocab_size, id + 1);
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = bytes_to_id.find(std::string(1, static_cast<char>(b)));
    if (it == bytes_to_id.end()) {
      char text[8];
      std::snprintf(text, sizeof text, "0x%02X", b);
      fail(std::string("key 'model.vocab' has no token for byte ") + text +
           "; a byte-level BPE vocabulary holds all 256 bytes");
    }
    byte_id[b] = it->second;
  }

  const json& list = model.contains("merges") ? model.at("merges") : json();
  if (!list.is_array()) fail("key 'model.merges': expected an array, got " + json_type(list));
  merges.reserve(list.size() * 2);
  for (size_t rank = 0; rank < list.size(); ++rank) {
    const json& merge = list[rank];
    std::string left, right;
    // Older files write "a b", newer ones ["a", "b"].
    if (merge.is_string()) {
      const std::string text = merge.get<std::string>();
      const size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos)
        fail("key 'model.merges[" + std::to_string(rank) + "]': \"" + text +
             "\" is not two tokens separated by one space");
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      fail("key 'model.merges[" + std::to_string(rank) + "]': expected \"a b\" or [\"a\", \"b\"], got " + merge.dump());
    }
    const auto left_bytes = to_bytes(left), right_bytes = to_bytes(right);
    const auto find = [&](const std::optional<std::string>& bytes) -> int32_t {
      if (!bytes) return -1;
      const auto it = bytes_to_id.find(*bytes);
      return it == bytes_to_id.end() ? -1 : it->second;
    };
    const int32_t left_id = find(left_bytes), right_id = find(right_bytes);
    const int32_t merged_id = left_bytes && right_bytes ? find(*left_bytes + *right_bytes) : -1;
    if (left_id < 0 || right_id < 0 || merged_id < 0) {
      fail("key 'model.merges[" + std::to_string(rank) + "]': \"" + left + "\" + \"" + right + "\": " +
           (left_id < 0    ? "\"" + left + "\""
            : right_id < 0 ? "\"" + right + "\""
                           : "the merged token") +
           " is not in the vocabulary");
    }
    const uint64_t key = (static_cast<uint64_t>(left_id) << 32) | static_cast<uint32_t>(right_id);
    merges.emplace(key, std::make_pair(static_cast<int32_t>(rank), merged_id));  // the first (lowest) rank wins
  }
}

void HfTokenizer::Impl::load_added_tokens(const json& list) {
  if (list.is_null()) return;
  if (!list.is_array()) fail("key 'added_tokens': expected an array, got " + json_type(list));
  added.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const json& entry = list[i];
    const std::string where = "key 'added_tokens[" + std::to_string(i) + "]'";
    if (!entry.is_object() || !entry.contains("id") || !entry.at("id").is_number_integer() ||
        !entry.contains("content") || !entry.at("content").is_string()) {
      fail(where + ": expected an object with an integer \"id\" and a string \"content\", got " + entry.dump());
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
      fail(where + ": id " + std::to_string(token.id) + " out of range [0, " + std::to_string(kMaxTokenIds) + ")");
    if (token.content.empty()) fail(where + ": empty content");
    added.push_back(std::move(token));
  }
  for (const AddedToken& token : added) {
    if (static_cast<size_t>(token.id) >= id_to_bytes.size()) id_to_bytes.resize(token.id + 1);
    id_to_bytes[token.id] = token.content;
    vocab_size = std::max(vocab_size, token.id + 1);
    added_by_content[token.content] = token.id;
    (token.normalized && !normalizer.empty() ? normalized_added : raw_added).tokens.push_back(&token);
  }
  is_special.assign(static_cast<size_t>(vocab_size), 0);
  for (const AddedToken& token : added) is_special[token.id] = token.special ? 1 : 0;
  // Normalized added tokens are matched in normalized text, so by their normalized form.
  for (const AddedToken*& token : normalized_added.tokens) {
    normalized_forms.push_back(*token);
    normalized_forms.back().content = normalize(token->content);
    token = &normalized_forms.back();
  }
  raw_added.build();
  normalized_added.build();
}

void HfTokenizer::Impl::load_normalizer(const json& node, const std::string& where) {
  if (node.is_null()) return;
  const std::string type = node.is_object() ? node.value("type", "") : "";
  using K = NormalizerStep::Kind;
  NormalizerStep step;
  if (type == "Sequence") {
    const json& list = node.contains("normalizers") ? node.at("normalizers") : json();
    if (!list.is_array()) fail("key '" + where + ".normalizers': expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      load_normalizer(list[i], where + ".normalizers[" + std::to_string(i) + "]");
    return;
  } else if (type == "NFC") {
    step.kind = K::kNfc;
  } else if (type == "NFD") {
    step.kind = K::kNfd;
  } else if (type == "NFKC") {
    step.kind = K::kNfkc;
  } else if (type == "NFKD") {
    step.kind = K::kNfkd;
  } else if (type == "Lowercase") {
    step.kind = K::kLowercase;
  } else if (type == "Prepend") {
    step.kind = K::kPrepend;
    step.content = node.value("prepend", "");
  } else if (type == "Replace") {
    step.kind = K::kReplace;
    const json& pattern = node.contains("pattern") ? node.at("pattern") : json();
    std::string regex;
    if (pattern.is_object() && pattern.contains("Regex")) {
      regex = pattern.at("Regex").get<std::string>();
    } else if (pattern.is_object() && pattern.contains("String")) {
      regex = regex_escape(pattern.at("String").get<std::string>());
    } else {
      fail("key '" + where + ".pattern': expected {\"Regex\": ...} or {\"String\": ...}");
    }
    step.pattern = std::make_shared<UnicodeRegex>(regex, source + ": " + where);
    step.content = node.value("content", "");
  } else {
    fail("key '" + where + "': normalizer '" + (type.empty() ? node.dump() : type) +
         "' is not supported (supported: NFC, NFD, NFKC, NFKD, Lowercase, Replace, Prepend, Sequence)");
  }
  normalizer.push_back(std::move(step));
}

void HfTokenizer::Impl::load_pre_tokenizer(const json& node, const std::string& where) {
  if (node.is_null()) return;
  const std::string type = node.is_object() ? node.value("type", "") : "";
  using K = PreTokenizerStep::Kind;
  PreTokenizerStep step;
  if (type == "Sequence") {
    const json& list = node.contains("pretokenizers") ? node.at("pretokenizers") : json();
    if (!list.is_array()) fail("key '" + where + ".pretokenizers': expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      load_pre_tokenizer(list[i], where + ".pretokenizers[" + std::to_string(i) + "]");
    return;
  } else if (type == "Split") {
    step.kind = K::kSplit;
    const json& pattern = node.contains("pattern") ? node.at("pattern") : json();
    std::string regex;
    if (pattern.is_object() && pattern.contains("Regex") && pattern.at("Regex").is_string()) {
      regex = pattern.at("Regex").get<std::string>();
    } else if (pattern.is_object() && pattern.contains("String") && pattern.at("String").is_string()) {
      regex = regex_escape(pattern.at("String").get<std::string>());
    } else {
      fail("key '" + where + ".pattern': expected {\"Regex\": ...} or {\"String\": ...}");
    }
    step.pattern = std::make_shared<UnicodeRegex>(regex, source + ": " + where);
    const std::string behavior = node.value("behavior", "Isolated");
    if (behavior == "Removed") {
      step.behavior = SplitBehavior::kRemoved;
    } else if (behavior == "Isolated") {
      step.behavior = SplitBehavior::kIsolated;
    } else if (behavior == "MergedWithPrevious") {
      step.behavior = SplitBehavior::kMergedWithPrevious;
    } else if (behavior == "MergedWithNext") {
      step.behavior = SplitBehavior::kMergedWithNext;
    } else if (behavior == "Contiguous") {
      step.behavior = SplitBehavior::kContiguous;
    } else {
      fail("key '" + where + ".behavior': unknown split behavior '" + behavior + "'");
    }
    step.invert = node.value("invert", false);
  } else if (type == "ByteLevel") {
    step.kind = K::kByteLevel;
    step.add_prefix_space = node.value("add_prefix_space", true);
    if (node.value("use_regex", true)) step.pattern = std::make_shared<UnicodeRegex>(kByteLevelPattern, "ByteLevel");
  } else if (type == "Digits") {
    step.kind = K::kDigits;
    step.individual_digits = node.value("individual_digits", false);
  } else {
    fail("key '" + where + "': pre-tokenizer '" + (type.empty() ? node.dump() : type) +
         "' is not supported (supported: ByteLevel, Split, Digits, Sequence; byte-level BPE files use these)");
  }
  pre_tokenizer.push_back(std::move(step));
}

void HfTokenizer::Impl::check_decoder(const json& node) const {
  if (node.is_null()) return;
  const std::string type = node.is_object() ? node.value("type", "") : "";
  if (type != "ByteLevel") {
    fail("key 'decoder': decoder '" + (type.empty() ? node.dump() : type) +
         "' is not supported (byte-level BPE decodes with ByteLevel)");
  }
}

void HfTokenizer::Impl::load_config(const json& config) {
  if (!config.is_object()) return;
  const auto resolve = [&](const char* key) -> int64_t {
    if (!config.contains(key) || config.at(key).is_null()) return -1;
    const auto text = token_text(config.at(key));
    if (!text) {
      throw sdk::ConfigError(source + ": tokenizer_config.json key '" + key + "': expected a token string, got " +
                             config.at(key).dump());
    }
    const auto added_it = added_by_content.find(*text);
    if (added_it != added_by_content.end()) return added_it->second;
    const auto vocab_it = bytes_to_id.find(*text);
    if (vocab_it != bytes_to_id.end()) return vocab_it->second;
    throw sdk::ConfigError(source + ": tokenizer_config.json key '" + key + "': token \"" + *text +
                           "\" is not in the vocabulary");
  };
  bos = resolve("bos_token");
  eos = resolve("eos_token");
  pad = resolve("pad_token");

  std::string chat_template;
  if (config.contains("chat_template")) {
    const json& value = config.at("chat_template");
    if (value.is_string()) {
      chat_template = value.get<std::string>();
    } else if (value.is_array()) {  // [{"name": "default", "template": ...}, ...]
      for (const json& entry : value) {
        if (entry.is_object() && entry.value("name", "") == "default") chat_template = entry.value("template", "");
      }
    }
  }
  if (chat_template.find("<|im_start|>") != std::string::npos) {
    detected_template = "chatml";
  } else if (chat_template.find("<|start_header_id|>") != std::string::npos) {
    detected_template = "llama3";
  }
}

std::string HfTokenizer::Impl::normalize(std::string_view text) const {
  std::string current(text);
  for (const NormalizerStep& step : normalizer) {
    using K = NormalizerStep::Kind;
    switch (step.kind) {
      case K::kNfc:
      case K::kNfd:
      case K::kNfkc:
      case K::kNfkd: {
        // ASCII is in every normal form already.
        if (std::all_of(current.begin(), current.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
          break;
        int options = UTF8PROC_STABLE;
        if (step.kind == K::kNfc) options |= UTF8PROC_COMPOSE;
        if (step.kind == K::kNfd) options |= UTF8PROC_DECOMPOSE;
        if (step.kind == K::kNfkc) options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
        if (step.kind == K::kNfkd) options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
        utf8proc_uint8_t* result = nullptr;
        const utf8proc_ssize_t length = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(current.data()),
                                                     static_cast<utf8proc_ssize_t>(current.size()), &result,
                                                     static_cast<utf8proc_option_t>(options));
        if (length < 0) break;  // invalid UTF-8 is left as it is, as the byte-level model encodes any bytes
        current.assign(reinterpret_cast<const char*>(result), static_cast<size_t>(length));
        std::free(result);
        break;
      }
      case K::kLowercase: {
        std::string out;
        out.reserve(current.size());
        for (size_t i = 0; i < current.size();) {
          uint32_t codepoint = 0;
          const size_t length = decode_utf8(current, i, codepoint);
          if (length == 0) {
            out.push_back(current[i++]);
            continue;
          }
          append_utf8(out, static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(codepoint))));
          i += length;
        }
        current = std::move(out);
        break;
      }
      case K::kReplace: {
        std::string out;
        size_t last = 0;
        for (const auto& [begin, end] : step.pattern->find_all(current)) {
          out.append(current, last, begin - last);
          out += step.content;
          last = end;
        }
        out.append(current, last, std::string::npos);
        current = std::move(out);
        break;
      }
      case K::kPrepend:
        if (!current.empty()) current = step.content + current;
        break;
    }
  }
  return current;
}

std::vector<AddedMatch> HfTokenizer::Impl::find_added(std::string_view text, const AddedMatcher& matcher) const {
  std::vector<AddedMatch> matches;
  if (matcher.empty()) return matches;
  size_t previous_end = 0;
  size_t i = 0;
  while (i < text.size()) {
    const auto& candidates = matcher.by_first_byte[static_cast<unsigned char>(text[i])];
    const AddedToken* found = nullptr;
    for (const AddedToken* token : candidates) {  // longest first: leftmost-longest
      if (text.compare(i, token->content.size(), token->content) == 0) {
        found = token;
        break;
      }
    }
    if (!found) {
      ++i;
      continue;
    }
    size_t begin = i, end = i + found->content.size();
    if (found->single_word) {
      // Only as a whole word: no word character touches it on either side.
      bool touches = false;
      if (begin > 0) {
        size_t start = begin - 1;
        while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        touches = word_char->matches_at(text, start);
      }
      if (!touches && end < text.size()) touches = word_char->matches_at(text, end);
      if (touches) {
        i = end;  // like the `tokenizers` scan, the rejected match is not searched again
        continue;
      }
    }
    if (found->lstrip) {
      while (begin > previous_end) {
        size_t start = begin - 1;
        while (start > previous_end && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        uint32_t codepoint = 0;
        if (decode_utf8(text, start, codepoint) == 0 || !is_unicode_whitespace(codepoint)) break;
        begin = start;
      }
    }
    if (found->rstrip) {
      while (end < text.size()) {
        uint32_t codepoint = 0;
        const size_t length = decode_utf8(text, end, codepoint);
        if (length == 0 || !is_unicode_whitespace(codepoint)) break;
        end += length;
      }
    }
    matches.push_back({begin, end, found->id});
    previous_end = end;
    i = end;
  }
  return matches;
}

// Splits every span by each pre-tokenizer step in order. `text` is the
// normalized text the spans index.
void HfTokenizer::Impl::pre_tokenize(std::string_view text, std::vector<Span>& spans) const {
  std::vector<Span> next;
  std::string buffer;
  for (const PreTokenizerStep& step : pre_tokenizer) {
    next.clear();
    for (const Span& span : spans) {
      bool prefix_space = span.prefix_space;
      if (step.kind == PreTokenizerStep::Kind::kByteLevel && step.add_prefix_space && !prefix_space &&
          !(span.end > span.begin && text[span.begin] == ' ')) {
        prefix_space = true;
      }
      // The span's text, with its virtual leading space; offset t in it is
      // text offset span.begin + t - 1 when there is one.
      std::string_view view = text.substr(span.begin, span.end - span.begin);
      if (prefix_space) {
        buffer.assign(1, ' ');
        buffer.append(view);
        view = buffer;
      }
      const size_t shift = prefix_space ? 1 : 0;
      const auto make = [&](size_t b, size_t e) {
        if (e <= b) return;
        Span piece;
        piece.prefix_space = prefix_space && b == 0;
        piece.begin = span.begin + (b == 0 ? 0 : b - shift);
        piece.end = span.begin + e - shift;
        next.push_back(piece);
      };
      if (step.kind == PreTokenizerStep::Kind::kByteLevel && !step.pattern) {
        make(0, view.size());
        continue;
      }
      // Pieces that are delimiters (matches, or gaps when inverted) and the rest.
      std::vector<std::pair<size_t, size_t>> delimiters;
      if (step.kind == PreTokenizerStep::Kind::kDigits) {
        for (size_t i = 0; i < view.size();) {
          if (view[i] >= '0' && view[i] <= '9') {
            size_t j = i + 1;
            if (!step.individual_digits) {
              while (j < view.size() && view[j] >= '0' && view[j] <= '9') ++j;
            }
            delimiters.emplace_back(i, j);
            i = j;
          } else {
            ++i;
          }
        }
      } else {
        delimiters = step.pattern->find_all(view);
      }
      const SplitBehavior behavior =
          step.kind == PreTokenizerStep::Kind::kSplit ? step.behavior : SplitBehavior::kIsolated;
      // (begin, end, is_delimiter) covering the view.
      std::vector<std::tuple<size_t, size_t, bool>> parts;
      size_t last = 0;
      for (const auto& [b, e] : delimiters) {
        if (b > last) parts.emplace_back(last, b, false);
        parts.emplace_back(b, e, true);
        last = e;
      }
      if (last < view.size()) parts.emplace_back(last, view.size(), false);
      if (step.kind == PreTokenizerStep::Kind::kSplit && step.invert) {
        for (auto& part : parts) std::get<2>(part) = !std::get<2>(part);
      }
      switch (behavior) {
        case SplitBehavior::kRemoved:
          for (const auto& [b, e, delimiter] : parts)
            if (!delimiter) make(b, e);
          break;
        case SplitBehavior::kIsolated:
          for (const auto& [b, e, delimiter] : parts) make(b, e);
          break;
        case SplitBehavior::kContiguous: {
          size_t i = 0;
          while (i < parts.size()) {
            size_t j = i + 1;
            if (std::get<2>(parts[i])) {
              while (j < parts.size() && std::get<2>(parts[j])) ++j;
            }
            make(std::get<0>(parts[i]), std::get<1>(parts[j - 1]));
            i = j;
          }
          break;
        }
        case SplitBehavior::kMergedWithPrevious: {
          size_t start = 0;
          for (const auto& [b, e, delimiter] : parts) {
            if (delimiter) {
              make(start, e);
              start = e;
            }
          }
          make(start, view.size());
          break;
        }
        case SplitBehavior::kMergedWithNext: {
          size_t start = 0;
          for (const auto& [b, e, delimiter] : parts) {
            if (delimiter && b > start) {
              make(start, b);
              start = b;
            }
          }
          make(start, view.size());
          break;
        }
      }
    }
    spans.swap(next);
  }
}

void HfTokenizer::Impl::bpe(std::string_view word, std::vector<int64_t>& ids) const {
  if (word.empty()) return;
  if (ignore_merges || word.size() == 1) {
    const auto it = bytes_to_id.find(std::string(word));
    if (it != bytes_to_id.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  struct Cache {
    uint64_t owner = 0;
    std::unordered_map<std::string, std::vector<int32_t>> words;
  };
  thread_local Cache cache;
  const bool cacheable = word.size() < kMaxCachedWordBytes;
  if (cacheable) {
    if (cache.owner != instance) {
      cache.words.clear();
      cache.owner = instance;
    }
    const auto it = cache.words.find(std::string(word));
    if (it != cache.words.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }

  // Repeatedly merge the adjacent pair of lowest rank (leftmost on ties), as
  // `tokenizers` does with its priority queue; words are short, so a linear
  // scan over cached pair ranks is fast.
  std::vector<int32_t> symbols(word.size());
  for (size_t i = 0; i < word.size(); ++i) symbols[i] = byte_id[static_cast<unsigned char>(word[i])];
  constexpr int32_t kNone = INT32_MAX;
  const auto pair_rank = [&](int32_t left, int32_t right, int32_t& merged) {
    const auto it = merges.find((static_cast<uint64_t>(left) << 32) | static_cast<uint32_t>(right));
    if (it == merges.end()) return kNone;
    merged = it->second.second;
    return it->second.first;
  };
  std::vector<int32_t> ranks(symbols.size(), kNone), merged_ids(symbols.size(), -1);
  for (size_t i = 0; i + 1 < symbols.size(); ++i) ranks[i] = pair_rank(symbols[i], symbols[i + 1], merged_ids[i]);
  while (symbols.size() > 1) {
    size_t best = 0;
    int32_t best_rank = kNone;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      if (ranks[i] < best_rank) {
        best_rank = ranks[i];
        best = i;
      }
    }
    if (best_rank == kNone) break;
    symbols[best] = merged_ids[best];
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    ranks.erase(ranks.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    merged_ids.erase(merged_ids.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    ranks[best] = best + 1 < symbols.size() ? pair_rank(symbols[best], symbols[best + 1], merged_ids[best]) : kNone;
    if (best > 0) ranks[best - 1] = pair_rank(symbols[best - 1], symbols[best], merged_ids[best - 1]);
  }
  ids.insert(ids.end(), symbols.begin(), symbols.end());
  if (cacheable) {
    if (cache.words.size() >= kMaxCachedWords) cache.words.clear();
    cache.words.emplace(std::string(word), std::move(symbols));
  }
}

// Normalized text (already split at raw added tokens) → ids. Offsets are in
// the normalized text; chunk_starts/chunk_piece map them to input pieces.
void HfTokenizer::Impl::encode_normalized_section(std::string_view text, size_t offset,
                                                  const std::vector<size_t>& chunk_starts,
                                                  const std::vector<size_t>& chunk_piece, std::vector<int64_t>& ids,
                                                  std::vector<size_t>* piece_of_id) const {
  const auto piece_at = [&](size_t position) {
    const auto it = std::upper_bound(chunk_starts.begin(), chunk_starts.end(), position);
    return chunk_piece[static_cast<size_t>(it - chunk_starts.begin()) - 1];
  };
  std::vector<Span> spans;
  std::string word;
  const auto encode_plain = [&](size_t begin, size_t end) {
    if (end <= begin) return;
    spans.assign(1, Span{begin, end, false});
    pre_tokenize(text, spans);
    for (const Span& span : spans) {
      const size_t before = ids.size();
      std::string_view bytes = text.substr(span.begin, span.end - span.begin);
      if (span.prefix_space) {
        word.assign(1, ' ');
        word.append(bytes);
        bytes = word;
      }
      bpe(bytes, ids);
      if (piece_of_id) piece_of_id->insert(piece_of_id->end(), ids.size() - before, piece_at(offset + span.begin));
    }
  };
  size_t last = 0;
  for (const AddedMatch& match : find_added(text, normalized_added)) {
    encode_plain(last, match.begin);
    ids.push_back(match.id);
    if (piece_of_id) piece_of_id->push_back(piece_at(offset + match.begin));
    last = match.end;
  }
  encode_plain(last, text.size());
}

void HfTokenizer::Impl::encode_text(std::string_view text, const std::vector<size_t>* piece_starts,
                                    std::vector<int64_t>& ids, std::vector<size_t>* piece_of_id) const {
  const auto piece_at = [&](size_t position) -> size_t {
    if (!piece_starts) return 0;
    const auto it = std::upper_bound(piece_starts->begin(), piece_starts->end(), position);
    return static_cast<size_t>(it - piece_starts->begin()) - 1;
  };
  std::vector<size_t> chunk_starts, chunk_piece;
  std::string normalized;
  const auto encode_section = [&](size_t begin, size_t end) {
    if (end <= begin) return;
    // Normalize piece by piece so offsets in the normalized text still tell
    // the piece (they differ from normalizing the whole only when a piece
    // starts with a combining mark).
    chunk_starts.clear();
    chunk_piece.clear();
    normalized.clear();
    size_t position = begin;
    while (position < end) {
      const size_t piece = piece_at(position);
      size_t chunk_end = end;
      if (piece_starts && piece + 1 < piece_starts->size()) chunk_end = std::min(end, (*piece_starts)[piece + 1]);
      chunk_starts.push_back(normalized.size());
      chunk_piece.push_back(piece);
      const std::string_view chunk = text.substr(position, chunk_end - position);
      if (normalizer.empty()) {
        normalized.append(chunk);
      } else {
        normalized += normalize(chunk);
      }
      position = chunk_end;
    }
    encode_normalized_section(normalized, 0, chunk_starts, chunk_piece, ids, piece_of_id);
  };
  size_t last = 0;
  for (const AddedMatch& match : find_added(text, raw_added)) {
    encode_section(last, match.begin);
    ids.push_back(match.id);
    if (piece_of_id) piece_of_id->push_back(piece_at(match.begin));
    last = match.end;
  }
  encode_section(last, text.size());
}

HfTokenizer::HfTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HfTokenizer::~HfTokenizer() = default;

std::unique_ptr<HfTokenizer> HfTokenizer::load(const std::filesystem::path& tokenizer_json) {
  const auto read = [](const std::filesystem::path& path, std::string& text) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return false;
    std::ostringstream buffer;
    buffer << in.rdbuf();
    text = buffer.str();
    return true;
  };
  std::string text;
  if (!read(tokenizer_json, text)) {
    throw sdk::ConfigError(tokenizer_json.string() + ": cannot read tokenizer file (" +
                           (std::filesystem::exists(tokenizer_json) ? "not a readable file" : "no such file") + ")");
  }
  const auto parse = [](const std::string& json_text, const std::filesystem::path& path) {
    try {
      return json::parse(json_text);
    } catch (const json::exception& error) {  // parse_error, or out_of_range for a number past a double
      throw sdk::ConfigError(path.string() + ": not valid JSON: " + error.what());
    }
  };
  const json tokenizer = parse(text, tokenizer_json);
  std::string config_text;
  json config;
  const std::filesystem::path config_path = tokenizer_json.parent_path() / "tokenizer_config.json";
  if (read(config_path, config_text)) config = parse(config_text, config_path);
  return build(tokenizer, config, tokenizer_json.string(), "hf:" + sdk::hex64(sdk::fnv1a(text)) + ":" + sdk::hex64(sdk::fnv1a(config_text)));
}

std::unique_ptr<HfTokenizer> HfTokenizer::from_json(const json& tokenizer, const json& config,
                                                    const std::string& source) {
  return build(tokenizer, config, source, "hf:" + sdk::hex64(sdk::fnv1a(tokenizer.dump())) + ":" + sdk::hex64(sdk::fnv1a(config.dump())));
}

// A function-try-block: the loaders check the keys they know, and a value of
// an unexpected JSON type anywhere else still ends as this file's ConfigError
// (the fuzzer found a boolean pre-tokenizer type escaping as json::type_error).
std::unique_ptr<HfTokenizer> HfTokenizer::build(const json& tokenizer, const json& config, const std::string& source,
                                                std::string fingerprint) try {
  auto impl = std::make_unique<Impl>();
  impl->source = source;
  if (!tokenizer.is_object())
    impl->fail("expected a JSON object (a Hugging Face tokenizer.json), got " + json_type(tokenizer));
  if (!tokenizer.contains("model")) impl->fail("missing key 'model' (is this a Hugging Face tokenizer.json?)");
  impl->word_char = std::make_shared<UnicodeRegex>(R"(\w)", "single_word");
  impl->load_normalizer(tokenizer.value("normalizer", json()), "normalizer");
  impl->load_pre_tokenizer(tokenizer.value("pre_tokenizer", json()), "pre_tokenizer");
  const bool byte_level =
      std::any_of(impl->pre_tokenizer.begin(), impl->pre_tokenizer.end(),
                  [](const PreTokenizerStep& s) { return s.kind == PreTokenizerStep::Kind::kByteLevel; });
  if (!byte_level) {
    impl->fail(
        "pre_tokenizer has no ByteLevel step: only byte-level BPE is supported (GPT-2, Llama 3, Qwen, SmolLM), "
        "not SentencePiece-style or whitespace BPE");
  }
  impl->check_decoder(tokenizer.value("decoder", json()));
  impl->load_model(tokenizer.at("model"));
  impl->load_added_tokens(tokenizer.value("added_tokens", json()));
  if (impl->is_special.size() < static_cast<size_t>(impl->vocab_size)) impl->is_special.resize(impl->vocab_size, 0);
  impl->load_config(config);
  if (impl->pad < 0)
    impl->pad = impl->eos;  // what TRL does for models without a pad token; padding is never trained on
  impl->fingerprint = std::move(fingerprint);
  return std::unique_ptr<HfTokenizer>(new HfTokenizer(std::move(impl)));
} catch (const json::exception& error) {
  throw sdk::ConfigError(source + ": unexpected value in tokenizer.json: " + error.what());
}

std::vector<int64_t> HfTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3 + 1);
  impl_->encode_text(text, nullptr, ids, nullptr);
  return ids;
}

std::vector<int64_t> HfTokenizer::encode_pieces(const std::vector<std::string_view>& pieces,
                                                std::vector<size_t>& piece_of_id) const {
  std::string text;
  std::vector<size_t> starts;
  for (const std::string_view piece : pieces) {
    starts.push_back(text.size());
    text.append(piece);
  }
  std::vector<int64_t> ids;
  piece_of_id.clear();
  if (pieces.empty()) return ids;
  impl_->encode_text(text, &starts, ids, &piece_of_id);
  return ids;
}

std::string HfTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string bytes;
  for (const int64_t id : ids) {
    if (id < 0 || id >= static_cast<int64_t>(impl_->id_to_bytes.size())) continue;
    if (impl_->is_special[id]) continue;
    bytes += impl_->id_to_bytes[id];
  }
  return lossy_utf8(bytes);
}

int64_t HfTokenizer::bos_id() const { return impl_->bos; }
int64_t HfTokenizer::eos_id() const { return impl_->eos; }
int64_t HfTokenizer::pad_id() const { return impl_->pad; }
int64_t HfTokenizer::vocab_size() const { return impl_->vocab_size; }

std::optional<int64_t> HfTokenizer::token_id(std::string_view token) const {
  const auto it = impl_->added_by_content.find(std::string(token));
  if (it != impl_->added_by_content.end()) return it->second;
  return std::nullopt;
}

std::string HfTokenizer::fingerprint() const { return impl_->fingerprint; }

const sdk::ChatTemplate* HfTokenizer::chat_template() const {
  return impl_->chat_template ? &*impl_->chat_template : nullptr;
}

const std::string& HfTokenizer::detected_chat_template() const { return impl_->detected_template; }

void HfTokenizer::set_chat_template(std::optional<sdk::ChatTemplate> chat_template) {
  impl_->chat_template = std::move(chat_template);
}

}  // namespace ptrain::tokenizer
