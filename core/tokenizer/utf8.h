// UTF-8 helpers for tokenizer.json: code points in and out, the lossy
// conversion decode() ends with, Unicode whitespace, and the byte ↔ code point
// alphabet in which byte-level BPE vocabularies are written.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ptrain::tokenizer::detail {

// Decodes one UTF-8 code point at text[i]; returns its length (0 when invalid).
size_t decode_utf8(std::string_view text, size_t i, uint32_t& codepoint);

void append_utf8(std::string& out, uint32_t codepoint);

// The start of the code point that ends just before text[i] (i > floor), not
// stepping back past `floor`.
size_t previous_codepoint_start(std::string_view text, size_t i, size_t floor);

// Replaces invalid UTF-8 with U+FFFD, one per maximal invalid subpart (the
// WHATWG rule that Rust's from_utf8_lossy and JavaScript's TextDecoder share).
std::string lossy_utf8(const std::string& bytes);

// The White_Space property (Unicode 15), which Rust's trim and Oniguruma's \s use.
bool is_unicode_whitespace(uint32_t codepoint);

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves,
// the other 68 bytes for code points 256, 257, ... in byte order.
std::array<uint32_t, 256> byte_to_codepoint();

}  // namespace ptrain::tokenizer::detail
