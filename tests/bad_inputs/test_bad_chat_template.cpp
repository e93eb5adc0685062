// The model's own chat template (tokenizer.chat_template = "auto") as bad
// input: a template the Jinja engine cannot render is refused when the run
// is built (ptrain train and ptrain validate build the tokenizer first),
// naming tokenizer_config.json, the line, the column and the construct; a
// conversation the template itself refuses (raise_exception) names the data
// file and line.
#include "catch.h"

#include "bad_inputs/rejection.h"
#include "support/run_command.h"

#include "core/config/run_config.h"
#include "core/tokenizer/jinja_chat_template.h"
#include "core/train/run_setup.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

using namespace ptrain;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path kExtracted = PTRAIN_TOKENIZER_EXTRACTED_DIR;

// Qwen3's tokenizer with `chat_template` in its tokenizer_config.json; the tokenizer section of a run using it.
config::TokenizerSection tokenizer_with_template(const fs::path& dir, const std::string& chat_template) {
  fs::copy_file(kExtracted / "qwen3" / "tokenizer.json", dir / "tokenizer.json", fs::copy_options::overwrite_existing);
  std::ifstream in(kExtracted / "qwen3" / "tokenizer_config.json");
  json config = json::parse(in);
  config["chat_template"] = chat_template;
  std::ofstream(dir / "tokenizer_config.json") << config.dump();
  config::TokenizerSection section;
  section.kind = config::TokenizerKind::kHf;
  section.path = (dir / "tokenizer.json").string();
  return section;
}

}  // namespace

TEST_CASE("a chat template the engine cannot render is refused at start-up, naming file, position and construct",
          "[bad_inputs][chat_template]") {
  const fs::path dir = testing::fresh_test_dir("bad_chat_template");
  const std::string config_file = (dir / "tokenizer_config.json").string();
  struct Case {
    const char* name;
    std::string source;
    std::string construct;
  };
  const std::vector<Case> cases = {
      {"a filter", "{% for m in messages %}\n{{ m.content | wordwrap(40) }}{% endfor %}",
       "line 2, column 16: unsupported filter 'wordwrap'"},
      {"a tag", "{% macro turn(m) %}{{ m.content }}{% endmacro %}", "line 1, column 4: unsupported tag 'macro'"},
      {"a function", "{{ bos_token }}{{ cycler('odd', 'even') }}", "unsupported function 'cycler()'"},
      {"a method", "{% for m in messages %}{{ m.content.zfill(3) }}{% endfor %}", "unsupported method '.zfill()'"},
      {"a test", "{% if messages is divisibleby(2) %}x{% endif %}", "unsupported test 'is divisibleby'"},
      {"an unclosed block", "{% for m in messages %}{{ m.content }}", "missing {% endfor %}"},
      {"an if left open inside a for",
       "{% for m in messages %}\n{% if m.role == 'user' %}{{ m.content }}\n{% endfor %}",
       "line 2, column 4: {% if %} is left open: {% endfor %} at line 3, column 4 comes before its {% endif %}"},
      {"an unclosed tag", "{{ messages[0].content ", "line 1, column 1: {{ is never closed"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const config::TokenizerSection section = tokenizer_with_template(dir, c.source);
    testing::check_rejected([&] { train::make_tokenizer(section); }, "ConfigError", config_file);
    testing::check_rejected([&] { train::make_tokenizer(section); }, "ConfigError", c.construct);
  }
  // A named template does not read the model's own, so such a model still trains with one.
  config::TokenizerSection named = tokenizer_with_template(dir, cases[0].source);
  named.chat_template = config::ChatTemplateChoice::kChatml;
  CHECK(train::make_tokenizer(named)->chat_template()->name == "chatml");
}

TEST_CASE("a conversation the model's template refuses names the data file and line", "[bad_inputs][chat_template]") {
  const sdk::ChatTemplate chat = tokenizer::make_jinja_chat_template(
      {"{% for m in messages %}{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}"
       "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
       "{{ m.content }}{% endfor %}",
       "", "", "tokenizer_config.json"});
  const auto render = [&] { chat.render({{"user", "a"}, {"user", "b"}}, false, "data/chats.jsonl:7"); };
  testing::check_rejected(render, "DataError", "data/chats.jsonl:7");
  testing::check_rejected(render, "DataError", "roles must alternate");
  // A type error inside the template is the data's problem too (here: content that is not a string).
  const sdk::ChatTemplate strict =
      tokenizer::make_jinja_chat_template({"{% for m in messages %}{{ m.content + 1 }}{% endfor %}", "", "", "t"});
  testing::check_rejected(
      [&] {
        strict.render({{"user", "a"}}, false, "data/chats.jsonl:2");
      },
      "DataError",
      "data/chats.jsonl:2: field 'messages': rendering the chat template of t failed at line 1, "
      "column 37: operator '+' between a string and a int value");
}
