#include "core/generation/completion_output.h"

#include <nlohmann/json.hpp>

namespace ptrain::generation {
namespace {

std::string dump(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

void write_completions_text(std::ostream& out, const std::vector<Completion>& completions,
                            const sdk::Tokenizer& tokenizer) {
  for (const Completion& completion : completions) {
    if (completion.generation == 0) {
      out << (completion.prompt == 0 ? "" : "\n") << "[" << completion.prompt + 1 << "] "
          << completion.prompt_text << "\n";
    }
    out << "  -> " << tokenizer.decode(completion.completion_ids) << "    ("
        << stop_reason_name(completion.stop_reason) << ", " << completion.completion_ids.size() << " tokens)\n";
  }
  out.flush();
}

void write_completions_jsonl(std::ostream& out, const std::vector<Completion>& completions,
                             const std::vector<sdk::Example>& prompts, const sdk::Tokenizer& tokenizer,
                             bool with_logprobs) {
  for (const Completion& completion : completions) {
    nlohmann::ordered_json line{{"prompt", completion.prompt_text},
                        {"completion", tokenizer.decode(completion.completion_ids)},
                        {"prompt_index", completion.prompt},
                        {"generation", completion.generation},
                        {"source", prompts[static_cast<size_t>(completion.prompt)].location},
                        {"stop_reason", stop_reason_name(completion.stop_reason)},
                        {"completion_tokens", completion.completion_ids.size()},
                        {"prompt_ids", completion.prompt_ids},
                        {"completion_ids", completion.completion_ids}};
    if (with_logprobs) line["logprobs"] = completion.logprobs;
    out << dump(line) << "\n";
  }
  out.flush();
}

}  // namespace ptrain::generation
