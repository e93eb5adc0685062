#include "core/tokenizer/utf8.h"

#include <utf8proc.h>

namespace ptrain::tokenizer::detail {

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

size_t previous_codepoint_start(std::string_view text, size_t i, size_t floor) {
  size_t start = i - 1;
  while (start > floor && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return start;
}

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
    // How many continuation bytes the lead byte needs, and the range the first
    // of them must fall in (excluding overlong forms, surrogates, > U+10FFFF).
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
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::array<uint32_t, 256> byte_to_codepoint() {
  std::array<uint32_t, 256> table{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    table[b] = printable ? b : next++;
  }
  return table;
}

}  // namespace ptrain::tokenizer::detail
