// Messages-style preference data: chosen and rejected as chat message lists.
//
//   {"prompt": [{"role": "user", ...}], "chosen": [{"role": "assistant", ...}], "rejected": [...]}
//   {"chosen": [user, assistant], "rejected": [user, assistant]}   (implicit prompt)
//
// Without a "prompt" field the messages chosen and rejected start with (equal
// role and content) are the shared prompt. The prompt is rendered with the
// run's chat template and its generation prompt (the assistant header); each
// answer is the rest of the rendered conversation, tokenized on its own as
// TRL does, trained on its assistant content and end-of-turn marker only and
// ending at its last trained token. A {bos} the template starts with is the
// pair's <bos>, kept when the prompt is truncated.
#pragma once

#include "dpo_data.h"

#include "ptrain/sdk/chat.h"

#include <string>
#include <vector>

namespace ptrain::dpo {

struct ChatPair {
  std::vector<sdk::ChatMessage> prompt;
  std::vector<sdk::ChatMessage> chosen;    // starts with an assistant message
  std::vector<sdk::ChatMessage> rejected;  // same
};

// Whether the example gives prompt, chosen or rejected as a message list.
bool is_chat_pair(const sdk::Example& example);

// Reads and checks a messages-style pair. Throws DataError naming file:line
// and the field ('chosen[1].role': unknown role, a string prompt with message
// answers, no shared prompt, an answer that does not start with the assistant).
// Roles are system, user and assistant, unless `chat_template` is the model's
// own (a renderer): that template decides which roles exist (a `tool` turn).
ChatPair read_chat_pair(const sdk::Example& example, const sdk::ChatTemplate* chat_template = nullptr);

// Renders the prompt and both conversations as tokenize_chat_pair will, so
// that a conversation the template refuses fails before training.
void check_chat_pair_renders(const sdk::ChatTemplate& chat_template, const ChatPair& pair, const std::string& location);

TokenizedPair tokenize_chat_pair(const sdk::Tokenizer& tokenizer, const sdk::ChatTemplate& chat_template,
                                 const ChatPair& pair, int64_t max_length, int64_t max_prompt_length,
                                 const std::string& location);

}  // namespace ptrain::dpo
