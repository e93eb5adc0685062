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

// The tokenizer and what the options make of it, loaded once for every line.
struct Tokenization {
  std::unique_ptr<sdk::Tokenizer> tokenizer;
  std::optional<sdk::ChatTemplate> chat_template;
  // The byte tokenizer's names (docs/file-formats.md#the-byte-tokenizer), or the tokenizer.json's.
  std::string bos_text = "<bos>";
  std::string eos_text = "<eos>";
  std::string field;  // the JSON field of each line; empty: lines are plain text
};

Tokenization load_tokenization(const TokenizeOptions& options) {
  Tokenization loaded;
  const tokenizer::HfTokenizer* hf = nullptr;
  if (options.tokenizer == "bytes") {
    loaded.tokenizer = std::make_unique<tokenizer::ByteTokenizer>();
  } else {
    auto from_file = tokenizer::HfTokenizer::load(options.tokenizer);
    hf = from_file.get();
    loaded.bos_text = hf->bos_text();
    loaded.eos_text = hf->eos_text();
    loaded.tokenizer = std::move(from_file);
  }
  if (!options.chat_template.empty()) loaded.chat_template = chosen_template(options, hf);
  if ((options.generation_prompt || options.show_mask || options.render) && !loaded.chat_template)
    throw sdk::UsageError("--generation-prompt, --mask and --render apply to conversations: add --template NAME");
  if (options.render && options.show_mask) throw sdk::UsageError("--render writes text, --mask ids: give one");
  // A conversation is always a JSON field; "messages" unless --jsonl says otherwise.
  loaded.field = !options.jsonl_field.empty() ? options.jsonl_field : loaded.chat_template ? "messages" : "";
  return loaded;
}

std::string json_line(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// --decode: a JSON array of ids back to its text (as {"FIELD": text} with --jsonl).
void decode_line(const Tokenization& loaded, const std::string& line, const std::string& location,
                 std::ostream& out) {
  const nlohmann::json ids = nlohmann::json::parse(line, nullptr, false);
  if (ids.is_discarded() || !ids.is_array()) throw sdk::DataError(location + ": expected a JSON array of token ids");
  std::vector<int64_t> values;
  const int64_t vocab_size = loaded.tokenizer->vocab_size();
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
  const std::string text = loaded.tokenizer->decode(values);
  out << (loaded.field.empty() ? text : json_line(nlohmann::json{{loaded.field, text}})) << '\n';
}

// A conversation of the line's field: its ids, its ids and loss mask, or its rendered text.
void encode_conversation(const TokenizeOptions& options, const Tokenization& loaded, const sdk::Example& example,
                         std::ostream& out) {
  const std::vector<sdk::ChatMessage> messages = sdk::read_messages(example, loaded.field.c_str());
  const std::vector<sdk::ChatSegment> segments =
      loaded.chat_template->render(messages, options.generation_prompt, example.location);
  if (options.render) {
    out << json_line(nlohmann::json(sdk::segments_to_text(segments, loaded.bos_text, loaded.eos_text))) << '\n';
    return;
  }
  const sdk::ChatTokens chat = sdk::tokenize_chat(*loaded.tokenizer, segments);
  if (!options.show_mask) {
    write_ids(out, chat.ids);
    out << '\n';
    return;
  }
  out << "{\"ids\":";
  write_ids(out, chat.ids);
  out << ",\"trainable\":";
  write_ids(out, std::vector<int64_t>(chat.trainable.begin(), chat.trainable.end()));
  out << "}\n";
}

void encode_line(const TokenizeOptions& options, const Tokenization& loaded, const std::string& line,
                 int64_t line_number, std::ostream& out) {
  if (loaded.field.empty()) {
    write_ids(out, loaded.tokenizer->encode(line));
    out << '\n';
    return;
  }
  sdk::Example example;
  example.index = line_number - 1;
  example.location = "stdin:" + std::to_string(line_number);
  example.fields = nlohmann::json::parse(line, nullptr, false);
  if (example.fields.is_discarded() || !example.fields.is_object())
    throw sdk::DataError(example.location + ": expected a JSON object (--jsonl " + loaded.field + ")");
  if (loaded.chat_template) {
    encode_conversation(options, loaded, example, out);
    return;
  }
  write_ids(out, loaded.tokenizer->encode(sdk::require_string(example, loaded.field.c_str())));
  out << '\n';
}

}  // namespace

int command_tokenize(const TokenizeOptions& options, std::istream& in, std::ostream& out) {
  const Tokenization loaded = load_tokenization(options);
  std::string line;
  int64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (options.decode) {
      decode_line(loaded, line, "stdin:" + std::to_string(line_number), out);
    } else {
      encode_line(options, loaded, line, line_number, out);
    }
  }
  out.flush();
  return 0;
}

}  // namespace ptrain::app
