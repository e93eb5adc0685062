#include "core/tokenizer/pre_tokenizer.h"

#include "core/tokenizer/json_pattern.h"
#include "core/tokenizer/utf8.h"

#include <algorithm>
#include <utility>

namespace ptrain::tokenizer::detail {

using nlohmann::json;

namespace {

// GPT-2's ByteLevel split, as the `tokenizers` ByteLevel pre-tokenizer has it built in.
const char* const kByteLevelPattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

using Ranges = std::vector<std::pair<size_t, size_t>>;  // [begin, end) byte offsets

// One span's text as a step sees it: with the virtual leading space of a
// ByteLevel add_prefix_space, if it has one; offset t in `view` is then text
// offset span.begin + t - 1.
struct SpanView {
  Span span;
  bool prefix_space = false;
  std::string_view view;

  // Adds view[b, e) to `out` as a span of the text; an empty piece is dropped.
  void emit(size_t b, size_t e, std::vector<Span>& out) const {
    if (e <= b) return;
    const size_t shift = prefix_space ? 1 : 0;
    Span piece;
    piece.prefix_space = prefix_space && b == 0;
    piece.begin = span.begin + (b == 0 ? 0 : b - shift);
    piece.end = span.begin + e - shift;
    out.push_back(piece);
  }
};

// A piece of a span's view: a delimiter (a match, or a gap when inverted) or not.
struct Part {
  size_t begin = 0;
  size_t end = 0;
  bool delimiter = false;
};

// Runs of ASCII digits, or each digit alone.
Ranges digit_runs(std::string_view view, bool individual_digits) {
  const auto is_digit = [&](size_t i) { return view[i] >= '0' && view[i] <= '9'; };
  Ranges runs;
  for (size_t i = 0; i < view.size();) {
    if (!is_digit(i)) {
      ++i;
      continue;
    }
    size_t j = i + 1;
    if (!individual_digits) {
      while (j < view.size() && is_digit(j)) ++j;
    }
    runs.emplace_back(i, j);
    i = j;
  }
  return runs;
}

// Parts covering [0, size): the delimiters and the gaps between them.
std::vector<Part> label_parts(size_t size, const Ranges& delimiters, bool invert) {
  std::vector<Part> parts;
  size_t last = 0;
  for (const auto& [b, e] : delimiters) {
    if (b > last) parts.push_back({last, b, invert});
    parts.push_back({b, e, !invert});
    last = e;
  }
  if (last < size) parts.push_back({last, size, invert});
  return parts;
}

void emit_parts(const std::vector<Part>& parts, SplitBehavior behavior, const SpanView& span, std::vector<Span>& out) {
  size_t start = 0;  // of the piece being merged
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const Part& part : parts)
        if (!part.delimiter) span.emit(part.begin, part.end, out);
      return;
    case SplitBehavior::kIsolated:
      for (const Part& part : parts) span.emit(part.begin, part.end, out);
      return;
    case SplitBehavior::kContiguous:  // adjacent delimiters become one piece
      for (size_t i = 0; i < parts.size();) {
        size_t j = i + 1;
        if (parts[i].delimiter) {
          while (j < parts.size() && parts[j].delimiter) ++j;
        }
        span.emit(parts[i].begin, parts[j - 1].end, out);
        i = j;
      }
      return;
    case SplitBehavior::kMergedWithPrevious:
      for (const Part& part : parts) {
        if (part.delimiter) {
          span.emit(start, part.end, out);
          start = part.end;
        }
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (const Part& part : parts) {
        if (part.delimiter && part.begin > start) {
          span.emit(start, part.begin, out);
          start = part.begin;
        }
      }
      break;
  }
  span.emit(start, span.view.size(), out);
}

SplitBehavior parse_behavior(const std::string& behavior, const std::string& where, const JsonSource& file) {
  static const std::pair<const char*, SplitBehavior> kNames[] = {
      {"Removed", SplitBehavior::kRemoved},
      {"Isolated", SplitBehavior::kIsolated},
      {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
      {"MergedWithNext", SplitBehavior::kMergedWithNext},
      {"Contiguous", SplitBehavior::kContiguous}};
  for (const auto& [name, value] : kNames) {
    if (behavior == name) return value;
  }
  file.fail("key '" + where + ".behavior': unknown split behavior '" + behavior + "'");
}

Metaspace::Prepend parse_prepend_scheme(const std::string& scheme, const std::string& where, const JsonSource& file) {
  if (scheme == "always") return Metaspace::Prepend::kAlways;
  if (scheme == "first") return Metaspace::Prepend::kFirst;
  if (scheme == "never") return Metaspace::Prepend::kNever;
  file.fail("key '" + where + ".prepend_scheme': unknown value '" + scheme + "' (expected always, first or never)");
}

}  // namespace

PreTokenizer PreTokenizer::load(const json& node, const JsonSource& file) {
  PreTokenizer pre_tokenizer;
  pre_tokenizer.add(node, "pre_tokenizer", file);
  return pre_tokenizer;
}

bool PreTokenizer::has_byte_level() const {
  return std::any_of(steps_.begin(), steps_.end(), [](const Step& s) { return s.kind == Step::Kind::kByteLevel; });
}

void PreTokenizer::add(const json& node, const std::string& where, const JsonSource& file) {
  if (node.is_null()) return;
  const std::string type = node.is_object() ? node.value("type", "") : "";
  Step step;
  if (type == "Sequence") {
    const json& list = node.contains("pretokenizers") ? node.at("pretokenizers") : json();
    if (!list.is_array()) file.fail("key '" + where + ".pretokenizers': expected an array");
    for (size_t i = 0; i < list.size(); ++i) add(list[i], where + ".pretokenizers[" + std::to_string(i) + "]", file);
    return;
  } else if (type == "Split") {
    step = split_step(node, where, file);
  } else if (type == "ByteLevel") {
    step.kind = Step::Kind::kByteLevel;
    step.add_prefix_space = node.value("add_prefix_space", true);
    if (node.value("use_regex", true)) step.pattern = std::make_shared<UnicodeRegex>(kByteLevelPattern, "ByteLevel");
  } else if (type == "Metaspace") {
    return add_metaspace(node, where, file);
  } else if (type == "Digits") {
    step.kind = Step::Kind::kDigits;
    step.individual_digits = node.value("individual_digits", false);
  } else {
    file.fail("key '" + where + "': pre-tokenizer '" + (type.empty() ? node.dump() : type) +
              "' is not supported (supported: ByteLevel, Split, Digits, Metaspace, Sequence)");
  }
  steps_.push_back(std::move(step));
}

PreTokenizer::Step PreTokenizer::split_step(const json& node, const std::string& where, const JsonSource& file) {
  Step step;
  step.kind = Step::Kind::kSplit;
  step.pattern = step_pattern(node, where, file);
  step.behavior = parse_behavior(node.value("behavior", "Isolated"), where, file);
  step.invert = node.value("invert", false);
  return step;
}

void PreTokenizer::add_metaspace(const json& node, const std::string& where, const JsonSource& file) {
  if (has_metaspace_ || !steps_.empty())
    file.fail("key '" + where + "': a Metaspace pre-tokenizer is supported only as the first step");
  const auto text_field = [&](const char* key, const std::string& fallback) {
    if (!node.contains(key) || node.at(key).is_null()) return fallback;
    if (!node.at(key).is_string()) file.fail("key '" + where + "." + key + "': expected a string");
    return node.at(key).get<std::string>();
  };
  Metaspace& metaspace = metaspace_;
  metaspace.replacement = text_field("replacement", metaspace.replacement);
  uint32_t codepoint = 0;
  if (metaspace.replacement.empty() || decode_utf8(metaspace.replacement, 0, codepoint) != metaspace.replacement.size())
    file.fail("key '" + where + ".replacement': expected one character, got \"" + metaspace.replacement + "\"");
  // Older files say add_prefix_space (true: always); prepend_scheme wins when both are there.
  const bool add_prefix_space = node.value("add_prefix_space", true);
  metaspace.prepend =
      parse_prepend_scheme(text_field("prepend_scheme", add_prefix_space ? "always" : "never"), where, file);
  metaspace.split = node.value("split", true);  // the Rust library's default
  has_metaspace_ = true;
  if (!metaspace.split) return;
  Step cut;  // a word starts at each replacement character
  cut.kind = Step::Kind::kSplit;
  cut.pattern = std::make_shared<UnicodeRegex>(escape_regex_literal(metaspace.replacement), file.name + ": " + where);
  cut.behavior = SplitBehavior::kMergedWithNext;
  steps_.push_back(std::move(cut));
}

void PreTokenizer::split(std::string_view text, std::vector<Span>& spans) const {
  std::vector<Span> next;
  std::string buffer;
  for (const Step& step : steps_) {
    next.clear();
    for (const Span& span : spans) split_span(step, text, span, buffer, next);
    spans.swap(next);
  }
}

void PreTokenizer::split_span(const Step& step, std::string_view text, const Span& span, std::string& buffer,
                              std::vector<Span>& out) {
  SpanView view{span, span.prefix_space, text.substr(span.begin, span.end - span.begin)};
  if (step.kind == Step::Kind::kByteLevel && step.add_prefix_space && !view.prefix_space &&
      !(span.end > span.begin && text[span.begin] == ' ')) {
    view.prefix_space = true;
  }
  if (view.prefix_space) {
    buffer.assign(1, ' ');
    buffer.append(view.view);
    view.view = buffer;
  }
  if (step.kind == Step::Kind::kByteLevel && !step.pattern) {
    view.emit(0, view.view.size(), out);
    return;
  }
  const Ranges delimiters = step.kind == Step::Kind::kDigits ? digit_runs(view.view, step.individual_digits)
                                                             : step.pattern->find_all(view.view);
  const bool split = step.kind == Step::Kind::kSplit;
  const std::vector<Part> parts = label_parts(view.view.size(), delimiters, split && step.invert);
  emit_parts(parts, split ? step.behavior : SplitBehavior::kIsolated, view, out);
}

}  // namespace ptrain::tokenizer::detail
