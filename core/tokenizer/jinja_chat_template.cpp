#include "core/tokenizer/jinja_chat_template.h"

#include "core/jinja/template.h"
#include "core/tokenizer/assistant_spans.h"
#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/fingerprint.h"

#include <memory>

namespace ptrain::tokenizer {
namespace {

class JinjaChatRenderer final : public sdk::ChatRenderer {
 public:
  explicit JinjaChatRenderer(const JinjaChatTemplateSource& source) : source_(source), template_(parse(source)) {}

  std::vector<sdk::ChatSegment> render(const std::vector<sdk::ChatMessage>& messages, bool add_generation_prompt,
                                       const std::string& location) const override {
    std::vector<jinja::Value> dicts;
    dicts.reserve(messages.size());
    for (const sdk::ChatMessage& message : messages) {
      dicts.push_back(jinja::Value::dict(
          {{"role", jinja::Value::string(message.role)}, {"content", jinja::Value::string(message.content)}}));
    }
    jinja::RenderTrace trace;
    const std::string text = render_text(dicts, add_generation_prompt, location, &trace);
    const auto render_prompt = [&](size_t k) {
      return render_text(std::vector<jinja::Value>(dicts.begin(), dicts.begin() + static_cast<std::ptrdiff_t>(k)), true,
                         location, nullptr);
    };
    return to_segments(text, assistant_spans(text, trace, template_.has_generation_blocks(), dicts, render_prompt));
  }

  std::string fingerprint() const override {
    return sdk::hex64(sdk::fnv1a(source_.source)) + "\n" + source_.bos_token + "\n" + source_.eos_token;
  }

 private:
  static jinja::Template parse(const JinjaChatTemplateSource& source) {
    try {
      return jinja::Template(source.source);
    } catch (const jinja::TemplateError& error) {
      throw sdk::ConfigError(source.origin + ": chat_template " + error.what() +
                             "; use tokenizer.chat_template = \"chatml\", \"llama3\", \"plain\" or \"custom\" instead");
    }
  }

  // transformers' apply_chat_template variables.
  std::string render_text(const std::vector<jinja::Value>& messages, bool add_generation_prompt,
                          const std::string& location, jinja::RenderTrace* trace) const {
    jinja::Dict variables = {{"messages", jinja::Value::list(messages)},
                             {"add_generation_prompt", jinja::Value::boolean(add_generation_prompt)},
                             {"tools", jinja::Value::none()}};
    if (!source_.bos_token.empty()) variables.emplace_back("bos_token", jinja::Value::string(source_.bos_token));
    if (!source_.eos_token.empty()) variables.emplace_back("eos_token", jinja::Value::string(source_.eos_token));
    try {
      return template_.render(variables, trace);
    } catch (const jinja::TemplateRaised& raised) {
      throw sdk::DataError(location + ": field 'messages': the chat template of " + source_.origin +
                           " refuses the conversation: " + raised.what());
    } catch (const jinja::TemplateError& error) {
      throw sdk::DataError(location + ": field 'messages': rendering the chat template of " + source_.origin +
                           " failed at " + error.what());
    }
  }

  // The text cut at the spans; a leading bos token becomes a kBos segment
  // (the tokenizer's id, and DPO keeps it in front of a truncated prompt).
  std::vector<sdk::ChatSegment> to_segments(const std::string& text, const std::vector<TextSpan>& spans) const {
    std::vector<sdk::ChatSegment> segments;
    size_t position = 0;
    if (!source_.bos_token.empty() && text.compare(0, source_.bos_token.size(), source_.bos_token) == 0) {
      segments.push_back({sdk::ChatSegment::Kind::kBos, "", false});
      position = source_.bos_token.size();
    }
    const auto append = [&](size_t end, bool trainable) {
      if (end > position)
        segments.push_back({sdk::ChatSegment::Kind::kText, text.substr(position, end - position), trainable});
      position = std::max(position, end);
    };
    for (const TextSpan& span : spans) {
      append(span.begin, false);
      append(span.end, true);
    }
    append(text.size(), false);
    return segments;
  }

  JinjaChatTemplateSource source_;
  jinja::Template template_;
};

}  // namespace

sdk::ChatTemplate make_jinja_chat_template(const JinjaChatTemplateSource& template_source) {
  sdk::ChatTemplate chat_template;
  chat_template.name = "auto";
  chat_template.renderer = std::make_shared<const JinjaChatRenderer>(template_source);
  return chat_template;
}

}  // namespace ptrain::tokenizer
