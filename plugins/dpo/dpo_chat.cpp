#include "dpo_chat.h"

#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/example_fields.h"

#include <algorithm>

namespace ptrain::dpo {
namespace {

// Message lists with their field name in errors; the built-in templates'
// roles are checked here so that an error names 'chosen[2].role' rather than
// an index into the rendered conversation.
std::vector<sdk::ChatMessage> read_message_field(const sdk::Example& example, const char* field,
                                                 bool template_decides_roles) {
  std::vector<sdk::ChatMessage> messages = sdk::read_messages(example, field);
  if (template_decides_roles) return messages;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      throw sdk::DataError(example.location + ": field '" + field + "[" + std::to_string(i) +
                           "].role': unknown role \"" + role + "\" (expected system, user or assistant)");
    }
  }
  return messages;
}

bool same_message(const sdk::ChatMessage& a, const sdk::ChatMessage& b) {
  return a.role == b.role && a.content == b.content;
}

// One answer's tokens: the conversation's segments after the prompt's,
// ending at the last trained token (a template's turn separator is not part of the answer).
Completion answer_tokens(const sdk::Tokenizer& tokenizer, const sdk::ChatTemplate& chat_template, const ChatPair& pair,
                         const std::vector<sdk::ChatMessage>& answer, size_t prompt_segments,
                         const std::string& location, const char* field) {
  std::vector<sdk::ChatMessage> conversation(pair.prompt);
  conversation.insert(conversation.end(), answer.begin(), answer.end());
  const std::vector<sdk::ChatSegment> segments = chat_template.render(conversation, false, location);
  const std::vector<sdk::ChatSegment> rest(segments.begin() + static_cast<std::ptrdiff_t>(prompt_segments),
                                           segments.end());
  sdk::ChatTokens tokens = sdk::tokenize_chat(tokenizer, rest);
  const auto last_trained = std::find(tokens.trainable.rbegin(), tokens.trainable.rend(), uint8_t{1});
  const auto kept = static_cast<size_t>(tokens.trainable.rend() - last_trained);
  if (kept == 0) {
    throw sdk::DataError(location + ": field '" + field +
                         "': the answer renders to no trainable token (empty assistant content and no end-of-turn "
                         "marker in the " +
                         chat_template.name + " template)");
  }
  tokens.ids.resize(kept);
  tokens.trainable.resize(kept);
  Completion completion{std::move(tokens.ids), std::move(tokens.trainable)};
  // The first token is always trained (the answer starts with assistant content), so a
  // mask of all ones is common; the empty mask says the same.
  if (std::all_of(completion.trained.begin(), completion.trained.end(), [](uint8_t t) { return t != 0; })) {
    completion.trained.clear();
  }
  return completion;
}

}  // namespace

bool is_chat_pair(const sdk::Example& example) {
  for (const char* field : {"prompt", "chosen", "rejected"}) {
    if (sdk::has_field(example, field) && example.fields.at(field).is_array()) return true;
  }
  return false;
}

ChatPair read_chat_pair(const sdk::Example& example, const sdk::ChatTemplate* chat_template) {
  const bool template_decides_roles = chat_template != nullptr && chat_template->renderer != nullptr;
  for (const char* field : {"chosen", "rejected"}) {
    if (sdk::has_field(example, field) && example.fields.at(field).is_string()) {
      throw sdk::DataError(example.location + ": field '" + field +
                           "': a string, while other fields are message lists; give prompt, chosen and rejected "
                           "all as strings or all as [{\"role\", \"content\"}] lists");
    }
  }
  ChatPair pair;
  pair.chosen = read_message_field(example, "chosen", template_decides_roles);
  pair.rejected = read_message_field(example, "rejected", template_decides_roles);
  if (sdk::has_field(example, "prompt")) {
    if (!example.fields.at("prompt").is_array()) {
      throw sdk::DataError(example.location +
                           ": field 'prompt': with message lists for chosen and rejected the prompt is a message "
                           "list too ([{\"role\": \"user\", \"content\": ...}]), or absent");
    }
    pair.prompt = read_message_field(example, "prompt", template_decides_roles);
  } else {
    // The implicit prompt: the messages both answers start with.
    const auto [chosen_end, rejected_end] =
        std::mismatch(pair.chosen.begin(), pair.chosen.end(), pair.rejected.begin(), pair.rejected.end(), same_message);
    const auto shared = chosen_end - pair.chosen.begin();
    if (shared == 0) {
      throw sdk::DataError(example.location +
                           ": field 'chosen': no prompt; give a 'prompt' message list, or start chosen and rejected "
                           "with the same messages");
    }
    pair.prompt.assign(pair.chosen.begin(), chosen_end);
    pair.chosen.erase(pair.chosen.begin(), chosen_end);
    pair.rejected.erase(pair.rejected.begin(), rejected_end);
  }
  using Answer = std::pair<const char*, const std::vector<sdk::ChatMessage>*>;
  for (const auto& [field, answer] : {Answer{"chosen", &pair.chosen}, Answer{"rejected", &pair.rejected}}) {
    if (answer->empty()) {
      throw sdk::DataError(example.location + ": field '" + field +
                           "': no answer after the prompt (chosen and rejected may not be equal or a prefix of each "
                           "other)");
    }
    if (answer->front().role != "assistant") {
      throw sdk::DataError(example.location + ": field '" + field +
                           "': the answer after the prompt must start with an assistant message, got role \"" +
                           answer->front().role + "\"");
    }
  }
  return pair;
}

void check_chat_pair_renders(const sdk::ChatTemplate& chat_template, const ChatPair& pair,
                             const std::string& location) {
  chat_template.render(pair.prompt, true, location);
  for (const std::vector<sdk::ChatMessage>* answer : {&pair.chosen, &pair.rejected}) {
    std::vector<sdk::ChatMessage> conversation(pair.prompt);
    conversation.insert(conversation.end(), answer->begin(), answer->end());
    chat_template.render(conversation, false, location);
  }
}

TokenizedPair tokenize_chat_pair(const sdk::Tokenizer& tokenizer, const sdk::ChatTemplate& chat_template,
                                 const ChatPair& pair, int64_t max_length, int64_t max_prompt_length,
                                 const std::string& location) {
  const std::vector<sdk::ChatSegment> prompt_segments = chat_template.render(pair.prompt, true, location);
  std::vector<int64_t> prompt = sdk::tokenize_chat(tokenizer, prompt_segments).ids;
  const bool has_bos = !prompt_segments.empty() && prompt_segments.front().kind == sdk::ChatSegment::Kind::kBos;
  if (has_bos) prompt.erase(prompt.begin());  // fit_pair puts it back in front of whatever prompt it keeps
  Completion chosen =
      answer_tokens(tokenizer, chat_template, pair, pair.chosen, prompt_segments.size(), location, "chosen");
  Completion rejected =
      answer_tokens(tokenizer, chat_template, pair, pair.rejected, prompt_segments.size(), location, "rejected");
  return fit_pair(prompt, has_bos ? tokenizer.bos_id() : -1, std::move(chosen), std::move(rejected), max_length,
                  max_prompt_length);
}

}  // namespace ptrain::dpo
