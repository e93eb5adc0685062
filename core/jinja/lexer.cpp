#include "core/jinja/lexer.h"

#include <cctype>
#include <cstring>

namespace ptrain::jinja {
namespace {

bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
bool is_word(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Longest first, so that "**" is not read as two "*".
const char* const kOperators[] = {"**", "//", "==", "!=", "<=", ">=", "(", ")", "[", "]", "{", "}", ",",
                                  ".",  ":",  "|",  "=",  "+",  "-",  "~", "*", "/", "%", "<", ">"};

class Lexer {
 public:
  explicit Lexer(const std::string& source) : src_(source) {
    // Jinja drops a single trailing newline of the template (keep_trailing_newline=False).
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      read_text();
      if (pos_ >= src_.size()) break;
      if (starts_with("{#")) {
        read_comment();
      } else {
        read_tag();
      }
    }
    tokens_.push_back({Token::Kind::kEnd, "", here()});
    return std::move(tokens_);
  }

 private:
  SourcePosition here() const { return {line_, column_}; }
  bool starts_with(const char* text) const { return src_.compare(pos_, std::strlen(text), text) == 0; }
  bool at_tag_start() const { return starts_with("{%") || starts_with("{{") || starts_with("{#"); }

  void advance(size_t count = 1) {
    for (size_t i = 0; i < count && pos_ < src_.size(); ++i, ++pos_) {
      if (src_[pos_] == '\n') {
        ++line_;
        column_ = 1;
      } else if ((static_cast<unsigned char>(src_[pos_]) & 0xC0) != 0x80) {
        ++column_;  // columns count code points
      }
    }
  }

  void skip_whitespace() {
    while (pos_ < src_.size() && is_space(src_[pos_])) advance();
  }

  // trim_blocks: the first newline after a block or comment tag is removed.
  void trim_block_newline() {
    if (pos_ < src_.size() && src_[pos_] == '\n') advance();
  }

  void read_text() {
    const SourcePosition start = here();
    std::string text;
    while (pos_ < src_.size() && !at_tag_start()) {
      text += src_[pos_];
      advance();
    }
    if (pos_ < src_.size() && !starts_with("{{")) lstrip_block(text);
    if (!text.empty()) tokens_.push_back({Token::Kind::kText, std::move(text), start});
  }

  // lstrip_blocks: spaces and tabs from the start of a line up to a block or
  // comment tag are removed (nothing is when other characters precede the tag).
  void lstrip_block(std::string& text) const {
    size_t begin = pos_;
    while (begin > 0 && (src_[begin - 1] == ' ' || src_[begin - 1] == '\t')) --begin;
    if (begin > 0 && src_[begin - 1] != '\n' && src_[begin - 1] != '\r') return;
    text.resize(text.size() - std::min(text.size(), pos_ - begin));
  }

  // {%- {{- {#-: the whitespace before the tag goes.
  void strip_previous_text() {
    if (tokens_.empty() || tokens_.back().kind != Token::Kind::kText) return;
    std::string& text = tokens_.back().text;
    while (!text.empty() && is_space(text.back())) text.pop_back();
    if (text.empty()) tokens_.pop_back();
  }

  void read_comment() {
    const SourcePosition start = here();
    advance(2);
    if (starts_with("-")) strip_previous_text();
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) throw TemplateError(start, "comment {# is never closed with #}");
    const bool strip_after = end > pos_ && src_[end - 1] == '-';
    advance(end + 2 - pos_);
    if (strip_after) skip_whitespace();
    trim_block_newline();
  }

  void read_tag() {
    const bool statement = starts_with("{%");
    const SourcePosition start = here();
    advance(2);
    if (starts_with("-")) {
      strip_previous_text();
      advance();
    }
    tokens_.push_back({statement ? Token::Kind::kOpenStatement : Token::Kind::kOpenExpression, "", start});
    int curly_depth = 0;  // "}}" inside a dict literal closes dicts, not the tag
    for (;;) {
      skip_whitespace();
      if (pos_ >= src_.size()) throw TemplateError(start, std::string(statement ? "{%" : "{{") + " is never closed");
      const bool strip = starts_with("-%}") || starts_with("-}}");
      if (statement ? (starts_with("%}") || starts_with("-%}"))
                    : (curly_depth == 0 && (starts_with("}}") || starts_with("-}}")))) {
        tokens_.push_back({statement ? Token::Kind::kCloseStatement : Token::Kind::kCloseExpression, "", here()});
        advance(strip ? 3 : 2);
        if (strip) skip_whitespace();
        if (statement) trim_block_newline();
        return;
      }
      read_token(curly_depth);
    }
  }

  void read_token(int& curly_depth) {
    const SourcePosition start = here();
    const char c = src_[pos_];
    if (c == '\'' || c == '"') return read_string(start);
    if (is_digit(c)) return read_number(start);
    if (is_word(c)) {
      std::string word;
      while (pos_ < src_.size() && is_word(src_[pos_])) {
        word += src_[pos_];
        advance();
      }
      tokens_.push_back({Token::Kind::kName, std::move(word), start});
      return;
    }
    for (const char* op : kOperators) {
      if (!starts_with(op)) continue;
      if (op[0] == '{') ++curly_depth;
      if (op[0] == '}') --curly_depth;
      tokens_.push_back({Token::Kind::kOperator, op, start});
      advance(std::strlen(op));
      return;
    }
    throw TemplateError(start, std::string("unexpected character '") + c + "' in a tag");
  }

  void read_number(const SourcePosition& start) {
    std::string digits;
    while (pos_ < src_.size() && is_digit(src_[pos_])) {
      digits += src_[pos_];
      advance();
    }
    const bool after_dot =
        !tokens_.empty() && tokens_.back().text == "." && tokens_.back().kind == Token::Kind::kOperator;
    if (!after_dot && pos_ + 1 < src_.size() && src_[pos_] == '.' && is_digit(src_[pos_ + 1])) {
      digits += '.';
      advance();
      while (pos_ < src_.size() && is_digit(src_[pos_])) {
        digits += src_[pos_];
        advance();
      }
      tokens_.push_back({Token::Kind::kFloat, std::move(digits), start});
      return;
    }
    tokens_.push_back({Token::Kind::kInteger, std::move(digits), start});
  }

  void read_string(const SourcePosition& start) {
    const char quote = src_[pos_];
    advance();
    std::string value;
    for (;;) {
      if (pos_ >= src_.size()) throw TemplateError(start, "string literal is never closed");
      const char c = src_[pos_];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        advance();
        continue;
      }
      advance();
      if (pos_ >= src_.size()) throw TemplateError(start, "string literal is never closed");
      read_escape(value);
    }
    advance();
    tokens_.push_back({Token::Kind::kString, std::move(value), start});
  }

  // Python's string escapes; an unknown one keeps its backslash, as in Python.
  void read_escape(std::string& value) {
    const char c = src_[pos_];
    const char* const simple = "n\nt\tr\rb\bf\fv\v''\"\"\\\\";
    for (const char* p = simple; *p; p += 2) {
      if (c == p[0]) {
        value += p[1];
        advance();
        return;
      }
    }
    if (c == 'x' || c == 'u') {
      const size_t width = c == 'x' ? 2 : 4;
      const std::string hex = src_.substr(pos_ + 1, width);
      if (hex.size() == width && hex.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos) {
        append_utf8(value, static_cast<uint32_t>(std::stoul(hex, nullptr, 16)));
        advance(width + 1);
        return;
      }
      throw TemplateError(here(), "invalid escape \\" + std::string(1, c) + hex);
    }
    value += '\\';
  }

  static void append_utf8(std::string& out, uint32_t code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  int column_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) { return Lexer(source).run(); }

}  // namespace ptrain::jinja
