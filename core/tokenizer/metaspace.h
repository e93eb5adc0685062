// The Metaspace pre-tokenizer (SentencePiece-style files, e.g. Mistral v0.3):
// every space becomes the replacement character (default "▁", U+2581) and,
// per `prepend_scheme`, one is put before a segment that does not start with
// it — "always" before every segment between added tokens, "first" only
// before the segment at the very start of the input, "never" not at all (as
// the Rust library decides "first": the segment's original offset is 0).
// With `split` (the Rust default), the segment is then cut before each
// replacement character; PreTokenizer adds that cut as a Split step.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ptrain::tokenizer::detail {

struct Metaspace {
  enum class Prepend { kAlways, kFirst, kNever };

  std::string replacement = "\xE2\x96\x81";  // ▁
  Prepend prepend = Prepend::kAlways;
  bool split = true;

  // `segment` rewritten. `at_input_start`: the segment begins the whole input.
  // origin[k] is the offset in `segment` that byte k of the result comes from
  // (a prepended replacement comes from 0).
  std::string rewrite(std::string_view segment, bool at_input_start, std::vector<size_t>& origin) const;
};

}  // namespace ptrain::tokenizer::detail
