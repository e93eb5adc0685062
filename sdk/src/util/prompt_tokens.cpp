#include "ptrain/sdk/util/prompt_tokens.h"

#include "ptrain/sdk/chat.h"
#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/example_fields.h"

namespace ptrain::sdk {

std::vector<int64_t> prompt_token_ids(const Tokenizer& tokenizer, const Example& example, int64_t max_length,
                                      std::string& text) {
  std::vector<int64_t> ids;
  if (has_field(example, "messages")) {
    const ChatTemplate* chat = tokenizer.chat_template();
    if (chat == nullptr) {
      throw DataError(example.location + ": field 'messages': the tokenizer has no chat template");
    }
    const std::vector<ChatSegment> segments = chat->render(read_messages(example), true, example.location);
    ids = tokenize_chat(tokenizer, segments).ids;
    text = segments_to_text(segments, "", "");
  } else {
    text = require_string(example, "prompt");
    if (tokenizer.bos_id() >= 0) ids.push_back(tokenizer.bos_id());
    const std::vector<int64_t> encoded = tokenizer.encode(text);
    ids.insert(ids.end(), encoded.begin(), encoded.end());
  }
  if (ids.empty()) {
    throw DataError(example.location + ": the prompt is empty and the tokenizer has no <bos>");
  }
  const int64_t max_prompt = max_length - 1;
  if (static_cast<int64_t>(ids.size()) > max_prompt) ids.erase(ids.begin(), ids.end() - max_prompt);
  return ids;
}

}  // namespace ptrain::sdk
