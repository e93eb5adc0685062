#include "core/app/tokenize_command.h"

#include "core/tokenizer/byte_tokenizer.h"
#include "core/tokenizer/hf_tokenizer.h"
#include "ptrain/sdk/chat.h"
#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/example_fields.h"

#include <nlohmann/json.hpp>

#include <istream>
#include <memory>
#include <optional>
#include <ostream>

namespace ptrain::app {
namespace {

void write_ids(std::ostream& out, const std::vector<int64_t>& ids) {
  out << '[';
  for (size_t i = 0; i < ids.size(); ++i) out << (i ? "," : "") << ids[i];
  out << ']';
}

// --template NAME: a built-in template, or "auto": the model's own (plain for bytes).
sdk::ChatTemplate chosen_template(const TokenizeOptions& options, const tokenizer::HfTokenizer* hf) {
  if (options.decode) throw sdk::UsageError("--template encodes conversations; it does not apply to --decode");
  if (options.chat_template != "auto" || !hf) {
    try {
      return sdk::ChatTemplate::named(options.chat_template == "auto" ? "plain" : options.chat_template);
    } catch (const sdk::ConfigError& error) {
      throw sdk::UsageError(std::string("--template: ") + error.what());
    }
  }
  std::optional<sdk::ChatTemplate> own = hf->own_chat_template();
  if (!own) {
    throw sdk::UsageError("--template auto: no tokenizer_config.json with a chat_template beside " + options.tokenizer +
                          "; give --template chatml, llama3 or plain");
  }
  return std::move(*own);
}

}  // namespace

int command_tokenize(const TokenizeOptions& options, std::istream& in, std::ostream& out) {
  std::unique_ptr<sdk::Tokenizer> tokenizer;
  const tokenizer::HfTokenizer* hf = nullptr;
  std::string bos_text = "<bos>", eos_text = "<eos>";  // the byte tokenizer's names (DESIGN.md §6)
  if (options.tokenizer == "bytes") {
    tokenizer = std::make_unique<tokenizer::ByteTokenizer>();
  } else {
    auto loaded = tokenizer::HfTokenizer::load(options.tokenizer);
    hf = loaded.get();
    bos_text = hf->bos_text();
    eos_text = hf->eos_text();
    tokenizer = std::move(loaded);
  }
  std::optional<sdk::ChatTemplate> chat_template;
  if (!options.chat_template.empty()) chat_template = chosen_template(options, hf);
  if ((options.generation_prompt || options.show_mask || options.render) && !chat_template)
    throw sdk::UsageError("--generation-prompt, --mask and --render apply to conversations: add --template NAME");
  if (options.render && options.show_mask) throw sdk::UsageError("--render writes text, --mask ids: give one");
  // A conversation is always a JSON field; "messages" unless --jsonl says otherwise.
  const std::string field = !options.jsonl_field.empty() ? options.jsonl_field : chat_template ? "messages" : "";

  std::string line;
  int64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    const std::string location = "stdin:" + std::to_string(line_number);
    if (options.decode) {
      const nlohmann::json ids = nlohmann::json::parse(line, nullptr, false);
      if (ids.is_discarded() || !ids.is_array())
        throw sdk::DataError(location + ": expected a JSON array of token ids");
      std::vector<int64_t> values;
      const int64_t vocab_size = tokenizer->vocab_size();
      for (size_t k = 0; k < ids.size(); ++k) {
        const nlohmann::json& id = ids[k];
        if (!id.is_number_integer()) throw sdk::DataError(location + ": expected integer ids, got " + id.dump());
        // Decoding drops ids it has no token for: refused, rather than text that silently lacks them.
        const bool in_range = id.is_number_unsigned() ? id.get<uint64_t>() < static_cast<uint64_t>(vocab_size)
                                                      : id.get<int64_t>() >= 0 && id.get<int64_t>() < vocab_size;
        if (!in_range) {
          throw sdk::DataError(location + ": id " + id.dump() + " (entry " + std::to_string(k) +
                               ") is not a token id of this tokenizer, which has ids 0 to " +
                               std::to_string(vocab_size - 1));
        }
        values.push_back(id.get<int64_t>());
      }
      const std::string text = tokenizer->decode(values);
      if (field.empty()) {
        out << text << '\n';
      } else {
        out << nlohmann::json{{field, text}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
      }
      continue;
    }
    if (field.empty()) {
      write_ids(out, tokenizer->encode(line));
      out << '\n';
      continue;
    }
    sdk::Example example;
    example.index = line_number - 1;
    example.location = location;
    example.fields = nlohmann::json::parse(line, nullptr, false);
    if (example.fields.is_discarded() || !example.fields.is_object())
      throw sdk::DataError(location + ": expected a JSON object (--jsonl " + field + ")");
    if (!chat_template) {
      write_ids(out, tokenizer->encode(sdk::require_string(example, field.c_str())));
      out << '\n';
      continue;
    }
    const std::vector<sdk::ChatMessage> messages = sdk::read_messages(example, field.c_str());
    const std::vector<sdk::ChatSegment> segments = chat_template->render(messages, options.generation_prompt, location);
    if (options.render) {
      out << nlohmann::json(sdk::segments_to_text(segments, bos_text, eos_text))
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
          << '\n';
      continue;
    }
    const sdk::ChatTokens chat = sdk::tokenize_chat(*tokenizer, segments);
    if (options.show_mask) {
      out << "{\"ids\":";
      write_ids(out, chat.ids);
      out << ",\"trainable\":";
      write_ids(out, std::vector<int64_t>(chat.trainable.begin(), chat.trainable.end()));
      out << "}\n";
    } else {
      write_ids(out, chat.ids);
      out << '\n';
    }
  }
  out.flush();
  return 0;
}

}  // namespace ptrain::app
