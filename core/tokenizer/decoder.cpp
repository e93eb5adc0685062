#include "core/tokenizer/decoder.h"

#include "core/tokenizer/json_pattern.h"
#include "core/tokenizer/utf8.h"

#include <utility>

namespace ptrain::tokenizer::detail {

using nlohmann::json;

namespace {

const char* const kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// The byte a `<0xNN>` token stands for, or -1.
int byte_of_token(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
  const auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const int high = hex(token[3]), low = hex(token[4]);
  return high < 0 || low < 0 ? -1 : high * 16 + low;
}

bool valid_utf8(const std::string& bytes) {
  for (size_t i = 0; i < bytes.size();) {
    uint32_t codepoint = 0;
    const size_t length = decode_utf8(bytes, i, codepoint);
    if (length == 0) return false;
    i += length;
  }
  return true;
}

// As the Rust library: a run of byte tokens that is not valid UTF-8 becomes
// one U+FFFD per byte (JavaScript's TextDecoder would merge some).
void flush_bytes(std::string& bytes, size_t count, std::vector<std::string>& out) {
  if (count == 0) return;
  if (valid_utf8(bytes)) {
    out.push_back(bytes);
  } else {
    for (size_t i = 0; i < count; ++i) out.emplace_back(kReplacementCharacter);
  }
  bytes.clear();
}

void byte_fallback(std::vector<std::string>& tokens) {
  std::vector<std::string> out;
  out.reserve(tokens.size());
  std::string bytes;
  size_t count = 0;
  for (std::string& token : tokens) {
    const int byte = byte_of_token(token);
    if (byte >= 0) {
      bytes.push_back(static_cast<char>(byte));
      ++count;
      continue;
    }
    flush_bytes(bytes, count, out);
    count = 0;
    out.push_back(std::move(token));
  }
  flush_bytes(bytes, count, out);
  tokens = std::move(out);
}

// Strip counts characters (code points), as the Rust library does.
void strip(std::string& token, const std::string& content, size_t start, size_t stop) {
  size_t begin = 0;
  for (size_t i = 0; i < start && token.compare(begin, content.size(), content) == 0; ++i) begin += content.size();
  size_t end = token.size();
  for (size_t i = 0;
       i < stop && end >= begin + content.size() && token.compare(end - content.size(), content.size(), content) == 0;
       ++i)
    end -= content.size();
  token = token.substr(begin, end - begin);
}

}  // namespace

Decoder Decoder::load(const json& node, const JsonSource& file) {
  Decoder decoder;
  if (node.is_object() && node.value("type", "") == "ByteLevel") {
    decoder.byte_level_ = true;
    return decoder;
  }
  decoder.add(node, "decoder", file);
  return decoder;
}

void Decoder::add(const json& node, const std::string& where, const JsonSource& file) {
  if (node.is_null()) return;
  const std::string type = node.is_object() ? node.value("type", "") : "";
  if (type == "Sequence") {
    const json& list = node.contains("decoders") ? node.at("decoders") : json();
    if (!list.is_array()) file.fail("key '" + where + ".decoders': expected an array");
    for (size_t i = 0; i < list.size(); ++i) add(list[i], where + ".decoders[" + std::to_string(i) + "]", file);
  } else if (type == "Replace") {
    steps_.push_back(replace_step(node, where, file));
  } else if (type == "ByteFallback") {
    steps_.push_back(Step{Step::Kind::kByteFallback, nullptr, "", 0, 0});
  } else if (type == "Fuse") {
    steps_.push_back(Step{Step::Kind::kFuse, nullptr, "", 0, 0});
  } else if (type == "Strip") {
    steps_.push_back(strip_step(node, where, file));
  } else {
    file.fail("key '" + where + "': decoder '" + (type.empty() ? node.dump() : type) +
              "' is not supported (supported: ByteLevel alone, or Replace, ByteFallback, Fuse, Strip and Sequences "
              "of them)");
  }
}

Decoder::Step Decoder::replace_step(const json& node, const std::string& where, const JsonSource& file) {
  if (!node.contains("content") || !node.at("content").is_string())
    file.fail("key '" + where + ".content': expected a string");
  Step step;
  step.kind = Step::Kind::kReplace;
  step.pattern = step_pattern(node, where, file);
  step.content = node.at("content").get<std::string>();
  return step;
}

Decoder::Step Decoder::strip_step(const json& node, const std::string& where, const JsonSource& file) {
  Step step;
  step.kind = Step::Kind::kStrip;
  const json& content = node.contains("content") ? node.at("content") : json();
  uint32_t codepoint = 0;
  if (!content.is_string() || content.get<std::string>().empty() ||
      decode_utf8(content.get<std::string>(), 0, codepoint) != content.get<std::string>().size())
    file.fail("key '" + where + ".content': expected one character, got " + content.dump());
  step.content = content.get<std::string>();
  for (const char* key : {"start", "stop"}) {
    const json& value = node.contains(key) ? node.at(key) : json(0);
    if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<int64_t>() >= 0))
      file.fail("key '" + where + "." + key + "': expected a count >= 0, got " + value.dump());
    (std::string(key) == "start" ? step.start : step.stop) = value.get<size_t>();
  }
  return step;
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  for (const Step& step : steps_) apply(step, tokens);
  std::string text;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0 && steps_.empty()) text += ' ';  // no decoder at all: the library joins with spaces
    text += tokens[i];
  }
  return text;
}

void Decoder::apply(const Step& step, std::vector<std::string>& tokens) {
  switch (step.kind) {
    case Step::Kind::kReplace:
      for (std::string& token : tokens) token = step.pattern->replace_all(token, step.content);
      return;
    case Step::Kind::kByteFallback:
      return byte_fallback(tokens);
    case Step::Kind::kFuse: {
      std::string fused;
      for (const std::string& token : tokens) fused += token;
      tokens.assign(1, std::move(fused));
      return;
    }
    case Step::Kind::kStrip:
      for (std::string& token : tokens) strip(token, step.content, step.start, step.stop);
      return;
  }
}

}  // namespace ptrain::tokenizer::detail
