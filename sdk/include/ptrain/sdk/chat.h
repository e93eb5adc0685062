// Chat data: messages, the templates that turn them into one token sequence,
// and which tokens an assistant-only loss trains on.
//
// A built-in template is data: text before the conversation (`begin`), a
// prefix and suffix around each role's content, and a separator after each
// turn. In the rendered conversation the trainable segments are each
// assistant turn's content and its suffix — the end-of-turn marker the model
// must learn to emit ("<|im_end|>", "<|eot_id|>", or <eos>). Template text may
// say {bos} and {eos} for the tokenizer's ids (the byte tokenizer has no text
// for them); message content is never interpreted.
//
// The model's own template (tokenizer.chat_template = "auto": the Jinja
// chat_template of tokenizer_config.json) is rendered by the core: the
// ChatTemplate then holds a ChatRenderer, and render() returns its segments.
#pragma once

#include "ptrain/sdk/batch.h"
#include "ptrain/sdk/tokenizer.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ptrain::sdk {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// Reads example.fields[field] as [{"role": str, "content": str}, ...]; a bad
// entry throws DataError "file:line: field 'messages[2].role': ...".
std::vector<ChatMessage> read_messages(const Example& example, const char* field = "messages");

// One rendered piece of a conversation.
struct ChatSegment {
  enum class Kind { kText, kBos, kEos };
  Kind kind = Kind::kText;
  std::string text;        // kText only
  bool trainable = false;  // part of an assistant turn: its content or its suffix
};

// A template the core renders (a Jinja chat template). Thread-safe: the data
// pipeline renders examples in parallel.
class ChatRenderer {
 public:
  virtual ~ChatRenderer() = default;
  // As ChatTemplate::render; a message the template refuses (its
  // raise_exception) throws DataError naming `location`.
  virtual std::vector<ChatSegment> render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                          const std::string& location) const = 0;
  virtual std::string fingerprint() const = 0;
};

class ChatTemplate {
 public:
  struct Role {
    std::string prefix;
    std::string suffix;
  };

  std::string name;   // "chatml", "llama3", "plain", or "custom"
  std::string begin;  // once before the first message
  Role system, user, assistant;
  std::string turn_separator;  // after every turn's suffix; never trained
  bool trim_content = false;   // strip whitespace around each content (Llama 3's `| trim`)
  // Set for the model's own template ("auto"): render() and fingerprint() are
  // the renderer's and the fields above are unused. Made by the core, which
  // outlives every plugin, so a plugin may keep a copy.
  std::shared_ptr<const ChatRenderer> renderer;

  // The built-in templates:
  //   chatml  "<|im_start|>{role}\n" content "<|im_end|>" "\n"   (Qwen 2/2.5/3, SmolLM2)
  //   llama3  {bos} once, "<|start_header_id|>{role}<|end_header_id|>\n\n" trim(content) "<|eot_id|>"
  //   plain   {bos} once, "System: " c "\n\n", "User: " c "\n", "Assistant: " c {eos}
  // Throws ConfigError naming the unknown name and the known ones.
  static ChatTemplate named(const std::string& name);
  static const std::vector<std::string>& builtin_names();

  // The conversation as segments; with add_generation_prompt the assistant
  // prefix follows (a prompt for generation, e.g. GRPO). A role other than
  // system/user/assistant throws DataError naming `location` and the message index.
  std::vector<ChatSegment> render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                  const std::string& location) const;

  // Every setting in one string, for cache keys.
  std::string fingerprint() const;
};

// The segments as one string, {bos}/{eos} written as the given texts.
std::string segments_to_text(const std::vector<ChatSegment>& segments, const std::string& bos_text = "{bos}",
                             const std::string& eos_text = "{eos}");

struct ChatTokens {
  std::vector<int64_t> ids;
  std::vector<uint8_t> trainable;  // same length as ids: 1 where the id covers a byte of a trainable segment
};

// Tokenizes rendered segments. Runs of text between {bos}/{eos} are encoded
// as one text (Tokenizer::encode_pieces), so the ids equal those of the whole
// rendered string; an id is trainable when any of its bytes lies in a
// trainable segment (a token straddling a role header and the assistant's
// content is trained, as in transformers' assistant mask). Throws
// ConfigError if the template uses {bos} or {eos} and the tokenizer has none.
ChatTokens tokenize_chat(const Tokenizer& tokenizer, const std::vector<ChatSegment>& segments);

}  // namespace ptrain::sdk
