#include "core/tokenizer/normalizer.h"

#include "core/tokenizer/json_pattern.h"
#include "core/tokenizer/utf8.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

namespace ptrain::tokenizer::detail {

using nlohmann::json;

namespace {

// Unicode normalization with utf8proc; `options` picks the form.
void normalize_form(std::string& text, int options) {
  // ASCII is in every normal form already.
  if (std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) return;
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &result, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | options));
  if (length < 0) return;  // invalid UTF-8 is left as it is, as the byte-level model encodes any bytes
  text.assign(reinterpret_cast<const char*>(result), static_cast<size_t>(length));
  std::free(result);
}

// Lowercases code point by code point; invalid bytes are kept as they are.
void lowercase(std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t codepoint = 0;
    const size_t length = decode_utf8(text, i, codepoint);
    if (length == 0) {
      out.push_back(text[i++]);
      continue;
    }
    append_utf8(out, static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(codepoint))));
    i += length;
  }
  text = std::move(out);
}

}  // namespace

Normalizer Normalizer::load(const json& node, const JsonSource& file) {
  Normalizer normalizer;
  normalizer.add(node, "normalizer", file);
  return normalizer;
}

void Normalizer::add(const json& node, const std::string& where, const JsonSource& file) {
  if (node.is_null()) return;
  const std::string type = node.is_object() ? node.value("type", "") : "";
  using K = Step::Kind;
  static const std::pair<const char*, K> kStepsWithoutFields[] = {
      {"NFC", K::kNfc}, {"NFD", K::kNfd}, {"NFKC", K::kNfkc}, {"NFKD", K::kNfkd}, {"Lowercase", K::kLowercase}};
  for (const auto& [name, kind] : kStepsWithoutFields) {
    if (type == name) {
      steps_.push_back(Step{kind, nullptr, ""});
      return;
    }
  }
  if (type == "Sequence") {
    const json& list = node.contains("normalizers") ? node.at("normalizers") : json();
    if (!list.is_array()) file.fail("key '" + where + ".normalizers': expected an array");
    for (size_t i = 0; i < list.size(); ++i) add(list[i], where + ".normalizers[" + std::to_string(i) + "]", file);
  } else if (type == "Prepend") {
    steps_.push_back(Step{K::kPrepend, nullptr, node.value("prepend", "")});
  } else if (type == "Replace") {
    steps_.push_back(replace_step(node, where, file));
  } else {
    file.fail("key '" + where + "': normalizer '" + (type.empty() ? node.dump() : type) +
              "' is not supported (supported: NFC, NFD, NFKC, NFKD, Lowercase, Replace, Prepend, Sequence)");
  }
}

Normalizer::Step Normalizer::replace_step(const json& node, const std::string& where, const JsonSource& file) {
  Step step;
  step.kind = Step::Kind::kReplace;
  step.pattern = step_pattern(node, where, file);
  step.content = node.value("content", "");
  return step;
}

std::string Normalizer::apply(std::string_view text, bool section_start) const {
  std::string current(text);
  for (const Step& step : steps_) apply_step(step, current, section_start);
  return current;
}

void Normalizer::apply_step(const Step& step, std::string& text, bool section_start) {
  switch (step.kind) {
    case Step::Kind::kNfc:
      return normalize_form(text, UTF8PROC_COMPOSE);
    case Step::Kind::kNfd:
      return normalize_form(text, UTF8PROC_DECOMPOSE);
    case Step::Kind::kNfkc:
      return normalize_form(text, UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
    case Step::Kind::kNfkd:
      return normalize_form(text, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
    case Step::Kind::kLowercase:
      return lowercase(text);
    case Step::Kind::kReplace:
      text = step.pattern->replace_all(text, step.content);
      return;
    case Step::Kind::kPrepend:
      if (section_start && !text.empty()) text = step.content + text;
      return;
  }
}

}  // namespace ptrain::tokenizer::detail
