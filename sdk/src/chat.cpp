#include "ptrain/sdk/chat.h"

#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/example_fields.h"

#include <algorithm>
#include <cstring>

namespace ptrain::sdk {
namespace {

const char* const kBosPlaceholder = "{bos}";
const char* const kEosPlaceholder = "{eos}";

// Template text split at {bos}/{eos} into segments.
void append_template_text(std::vector<ChatSegment>& out, const std::string& text, bool trainable) {
  size_t start = 0;
  while (start < text.size()) {
    const size_t bos = text.find(kBosPlaceholder, start);
    const size_t eos = text.find(kEosPlaceholder, start);
    const size_t next = std::min(bos, eos);
    if (next > start) out.push_back({ChatSegment::Kind::kText, text.substr(start, next - start), trainable});
    if (next == std::string::npos) break;
    out.push_back({next == bos ? ChatSegment::Kind::kBos : ChatSegment::Kind::kEos, "", trainable});
    start = next + std::strlen(kBosPlaceholder);  // both placeholders have 5 characters
  }
}

// Python's str.strip(): Jinja's `trim` filter strips Unicode whitespace; ASCII
// whitespace and the no-break spaces cover what chat data contains.
std::string trim(const std::string& text) {
  const auto is_space = [](const std::string& s, size_t i, size_t& width) {
    const auto c = static_cast<unsigned char>(s[i]);
    width = 1;
    if (c == ' ' || (c >= '\t' && c <= '\r')) return true;
    if (c == 0xC2 && i + 1 < s.size() &&
        (static_cast<unsigned char>(s[i + 1]) == 0xA0 || static_cast<unsigned char>(s[i + 1]) == 0x85)) {
      width = 2;
      return true;
    }
    return false;
  };
  size_t begin = 0, width = 0;
  while (begin < text.size() && is_space(text, begin, width)) begin += width;
  size_t end = text.size();
  while (end > begin) {
    // Step back over one code point: continuation bytes are 10xxxxxx.
    size_t start = end - 1;
    while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    if (!is_space(text, start, width) || start + width != end) break;
    end = start;
  }
  return text.substr(begin, end - begin);
}

std::string role_header(const std::string& open, const std::string& role, const std::string& close) {
  return open + role + close;
}

ChatTemplate role_template(const std::string& name, const std::string& open, const std::string& close,
                           const std::string& end) {
  ChatTemplate t;
  t.name = name;
  t.system = {role_header(open, "system", close), end};
  t.user = {role_header(open, "user", close), end};
  t.assistant = {role_header(open, "assistant", close), end};
  return t;
}

}  // namespace

std::vector<ChatMessage> read_messages(const Example& example, const char* field) {
  if (!has_field(example, field)) throw DataError(example.location + ": missing field '" + field + "'");
  const nlohmann::json& list = example.fields.at(field);
  if (!list.is_array()) {
    throw DataError(example.location + ": field '" + field +
                    "': expected an array of {\"role\", \"content\"} objects, got " + list.type_name());
  }
  std::vector<ChatMessage> messages;
  messages.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = example.location + ": field '" + field + "[" + std::to_string(i) + "]";
    const nlohmann::json& message = list[i];
    if (!message.is_object()) throw DataError(where + "': expected an object, got " + message.type_name());
    ChatMessage parsed;
    for (const char* key : {"role", "content"}) {
      if (!message.contains(key)) throw DataError(where + "': missing key '" + key + "'");
      const nlohmann::json& value = message.at(key);
      if (!value.is_string()) throw DataError(where + "." + key + "': expected a string, got " + value.type_name());
      (std::strcmp(key, "role") == 0 ? parsed.role : parsed.content) = value.get<std::string>();
    }
    messages.push_back(std::move(parsed));
  }
  return messages;
}

const std::vector<std::string>& ChatTemplate::builtin_names() {
  static const std::vector<std::string> names = {"chatml", "llama3", "plain"};
  return names;
}

ChatTemplate ChatTemplate::named(const std::string& name) {
  if (name == "chatml") {
    ChatTemplate t = role_template("chatml", "<|im_start|>", "\n", "<|im_end|>");
    t.turn_separator = "\n";
    return t;
  }
  if (name == "llama3") {
    ChatTemplate t = role_template("llama3", "<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>");
    t.begin = kBosPlaceholder;
    t.trim_content = true;
    return t;
  }
  if (name == "plain") {
    ChatTemplate t;
    t.name = "plain";
    t.begin = kBosPlaceholder;
    t.system = {"System: ", "\n\n"};
    t.user = {"User: ", "\n"};
    t.assistant = {"Assistant: ", kEosPlaceholder};
    return t;
  }
  std::string known;
  for (const auto& builtin : builtin_names()) known += (known.empty() ? "" : ", ") + builtin;
  throw ConfigError("unknown chat template '" + name + "' (built-in templates: " + known +
                    "; or \"custom\" with tokenizer.chat_* keys)");
}

std::vector<ChatSegment> ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                              const std::string& location) const {
  if (renderer) return renderer->render(messages, add_generation_prompt, location);
  std::vector<ChatSegment> segments;
  append_template_text(segments, begin, false);
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& message = messages[i];
    const Role* role = message.role == "system"      ? &system
                       : message.role == "user"      ? &user
                       : message.role == "assistant" ? &assistant
                                                     : nullptr;
    if (!role) {
      throw DataError(location + ": field 'messages[" + std::to_string(i) + "].role': unknown role \"" + message.role +
                      "\" (the " + name + " chat template knows system, user, assistant)");
    }
    const bool trainable = role == &assistant;
    append_template_text(segments, role->prefix, false);
    std::string content = trim_content ? trim(message.content) : message.content;
    if (!content.empty()) segments.push_back({ChatSegment::Kind::kText, std::move(content), trainable});
    append_template_text(segments, role->suffix, trainable);
    append_template_text(segments, turn_separator, false);
  }
  if (add_generation_prompt) append_template_text(segments, assistant.prefix, false);
  return segments;
}

std::string ChatTemplate::fingerprint() const {
  if (renderer) return name + "\n" + renderer->fingerprint();
  // JSON escapes every string, so no two templates print the same.
  const nlohmann::json value = {name,           begin,       system.prefix,    system.suffix,
                                user.prefix,    user.suffix, assistant.prefix, assistant.suffix,
                                turn_separator, trim_content};
  return value.dump();
}

std::string segments_to_text(const std::vector<ChatSegment>& segments, const std::string& bos_text,
                             const std::string& eos_text) {
  std::string text;
  for (const ChatSegment& segment : segments) {
    text += segment.kind == ChatSegment::Kind::kBos   ? bos_text
            : segment.kind == ChatSegment::Kind::kEos ? eos_text
                                                      : segment.text;
  }
  return text;
}

ChatTokens tokenize_chat(const Tokenizer& tokenizer, const std::vector<ChatSegment>& segments) {
  ChatTokens out;
  std::vector<std::string_view> run;
  std::vector<bool> run_trainable;
  std::vector<PieceRange> pieces_of_id;
  const auto flush = [&]() {
    if (run.empty()) return;
    const std::vector<int64_t> ids = tokenizer.encode_pieces(run, pieces_of_id);
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    // A token with any byte in a trainable segment is trained, as transformers'
    // assistant mask (char_to_token of the span's first and last character) has it.
    for (const PieceRange& pieces : pieces_of_id) {
      const auto first = run_trainable.begin() + static_cast<std::ptrdiff_t>(pieces.first);
      const auto last = run_trainable.begin() + static_cast<std::ptrdiff_t>(pieces.last) + 1;
      out.trainable.push_back(std::find(first, last, true) != last ? 1 : 0);
    }
    run.clear();
    run_trainable.clear();
  };
  for (const ChatSegment& segment : segments) {
    if (segment.kind == ChatSegment::Kind::kText) {
      run.push_back(segment.text);
      run_trainable.push_back(segment.trainable);
      continue;
    }
    flush();
    const bool bos = segment.kind == ChatSegment::Kind::kBos;
    const int64_t id = bos ? tokenizer.bos_id() : tokenizer.eos_id();
    if (id < 0) {
      throw ConfigError(std::string("the chat template uses ") + (bos ? kBosPlaceholder : kEosPlaceholder) +
                        " but the tokenizer has no " + (bos ? "bos" : "eos") +
                        " token; write the token's text in the template instead");
    }
    out.ids.push_back(id);
    out.trainable.push_back(segment.trainable ? 1 : 0);
  }
  flush();
  return out;
}

}  // namespace ptrain::sdk
