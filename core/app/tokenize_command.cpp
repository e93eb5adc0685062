#include "core/app/tokenize_command.h"

#include "core/tokenizer/byte_tokenizer.h"
#include "core/tokenizer/hf_tokenizer.h"
#include "ptrain/sdk/chat.h"
#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/example_fields.h"

#include <nlohmann/json.hpp>

#include <istream>
#include <memory>
#include <ostream>

namespace ptrain::app {
namespace {

void write_ids(std::ostream& out, const std::vector<int64_t>& ids) {
  out << '[';
  for (size_t i = 0; i < ids.size(); ++i) out << (i ? "," : "") << ids[i];
  out << ']';
}

}  // namespace

int command_tokenize(const TokenizeOptions& options, std::istream& in, std::ostream& out) {
  std::unique_ptr<sdk::Tokenizer> tokenizer;
  std::string detected = "plain";
  if (options.tokenizer == "bytes") {
    tokenizer = std::make_unique<tokenizer::ByteTokenizer>();
  } else {
    auto hf = tokenizer::HfTokenizer::load(options.tokenizer);
    detected = hf->detected_chat_template();
    tokenizer = std::move(hf);
  }
  std::optional<sdk::ChatTemplate> chat_template;
  if (!options.chat_template.empty()) {
    if (options.decode) throw sdk::UsageError("--template encodes conversations; it does not apply to --decode");
    const std::string name = options.chat_template == "auto" ? detected : options.chat_template;
    if (name.empty()) {
      throw sdk::UsageError(
          "--template auto: " + options.tokenizer +
          " names no chat template family in tokenizer_config.json; give --template chatml, llama3 or plain");
    }
    try {
      chat_template = sdk::ChatTemplate::named(name);
    } catch (const sdk::ConfigError& error) {
      throw sdk::UsageError(std::string("--template: ") + error.what());
    }
  }
  if ((options.generation_prompt || options.show_mask) && !chat_template)
    throw sdk::UsageError("--generation-prompt and --mask apply to conversations: add --template NAME");
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
      for (const auto& id : ids) {
        if (!id.is_number_integer()) throw sdk::DataError(location + ": expected integer ids, got " + id.dump());
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
    const sdk::ChatTokens chat =
        sdk::tokenize_chat(*tokenizer, chat_template->render(messages, options.generation_prompt, location));
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
