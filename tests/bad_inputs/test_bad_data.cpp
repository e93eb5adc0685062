// Bad JSONL datasets: each is a DataError naming file:line (or the file), as
// the SFT plugin checks them before training; data.on_error = "skip" leaves
// the bad lines out and reports them.
#include "catch.h"

#include "bad_inputs/rejection.h"
#include "support/run_command.h"
#include "support/test_util.h"

#include "core/dist/communicator.h"
#include "core/plugin/host_context.h"
#include "core/train/run_setup.h"
#include "sft_config.h"
#include "sft_module.h"

#include <filesystem>
#include <string>
#include <vector>

using namespace ptrain;
namespace fs = std::filesystem;

namespace {

// An SFT module set up as `ptrain train` sets it up: byte tokenizer, plain chat template.
struct SftSetup {
  config::RunConfig config;
  std::unique_ptr<sdk::Tokenizer> tokenizer;
  std::unique_ptr<model::CausalLm> policy = model::CausalLm::init_random(testing::tiny_model_config(), 0);
  sdk::ConfigValues values;
  std::unique_ptr<dist::Communicator> communicator = dist::make_single_process_communicator();
  std::unique_ptr<plugin::HostContext> context;
  sft::SftModule module;

  explicit SftSetup(const std::string& on_error) {
    config.tokenizer.kind = config::TokenizerKind::kBytes;
    config.tokenizer.chat_template = config::ChatTemplateChoice::kPlain;
    config.data.max_length = 64;
    config.data.on_error = on_error == "skip" ? config::OnBadExample::kSkip : config::OnBadExample::kFail;
    tokenizer = train::make_tokenizer(config.tokenizer);
    sdk::ConfigSchema schema;
    sft::declare_sft_config(schema);
    values = sdk::ConfigValues::defaults_of(schema, "module");
    context = std::make_unique<plugin::HostContext>(*policy, *tokenizer, values, *communicator,
                                                    sdk::RunInfo{0, config.data.max_length, 0, 0, ""});
    module.setup(*context);
  }

  std::vector<sdk::Example> load(const fs::path& file, std::vector<std::string>* skipped = nullptr) {
    config.data.train = file.string();
    return train::load_examples(config, module, skipped);
  }
};

const std::string kGood = R"({"prompt": "1+1=", "completion": "2"})";
const std::string kGoodChat =
    R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]})";

struct DataCase {
  const char* name;
  std::string text;      // the file's bytes
  std::string location;  // appended to the file path
};

}  // namespace

TEST_CASE("bad JSONL examples are rejected naming file:line", "[bad_inputs][data]") {
  const fs::path dir = testing::fresh_test_dir("bad_data");
  const std::vector<DataCase> cases = {
      {"invalid JSON", kGood + "\n{\"prompt\": \n", ":2: invalid JSON"},
      {"unterminated string", kGood + "\n" + kGood + "\n{\"prompt\": \"abc\n", ":3: invalid JSON"},
      {"trailing garbage", kGood + " x\n", ":1: invalid JSON"},
      // A number too large for a double makes nlohmann's parser throw out_of_range, not parse_error.
      {"number overflow", "{\"prompt\": \"a\", \"completion\": \"b\", \"n\": 1e999999}\n", ":1: invalid JSON"},
      {"an array, not an object", "[1, 2]\n", ":1: expected a JSON object, got array"},
      {"a bare string", "\"text\"\n", ":1: expected a JSON object, got string"},
      {"non-UTF-8 bytes", "{\"prompt\": \"\xff\xfe\", \"completion\": \"a\"}\n", ":1: invalid JSON"},
      {"overlong UTF-8 encoding", "{\"prompt\": \"\xc0\xaf\", \"completion\": \"a\"}\n", ":1: invalid JSON"},
      {"missing completion", kGood + "\n{\"prompt\": \"a\"}\n", ":2: missing field 'completion'"},
      {"missing prompt", "{\"completion\": \"a\"}\n", ":1: missing field 'prompt'"},
      {"mistyped prompt", "{\"prompt\": 3, \"completion\": \"a\"}\n", ":1: field 'prompt': expected a string"},
      {"mistyped completion", "{\"prompt\": \"a\", \"completion\": null}\n",
       ":1: field 'completion': expected a string"},
      {"completion a list", kGood + "\n\n{\"prompt\": \"a\", \"completion\": [\"b\"]}\n",
       ":3: field 'completion': expected a string"},
      {"messages and prompt together",
       R"({"prompt": "a", "messages": []})"
       "\n",
       ":1: field 'messages'"},
      {"messages not an array",
       R"({"messages": "hi"})"
       "\n",
       ":1: field 'messages': expected an array"},
      {"message without a role",
       R"({"messages": [{"content": "hi"}]})"
       "\n",
       ":1: field 'messages[0]': missing key 'role'"},
      {"message content not a string",
       R"({"messages": [{"role": "user", "content": 5}]})"
       "\n",
       ":1: field 'messages[0].content': expected a string"},
      {"unknown role",
       R"({"messages": [{"role": "robot", "content": "beep"}]})"
       "\n",
       ":1: field 'messages[0].role': unknown role \"robot\""},
      {"assistant first",
       R"({"messages": [{"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}]})"
       "\n",
       ":1: field 'messages[0].role': expected \"user\", got \"assistant\""},
      {"two user turns in a row",
       kGoodChat + "\n" +
           R"({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}, {"role": "assistant", "content": "c"}]})"
           "\n",
       ":2: field 'messages[1].role': expected \"assistant\", got \"user\""},
      {"system message not first",
       R"({"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "b"}]})"
       "\n",
       ":1: field 'messages[1].role': expected \"assistant\", got \"system\""},
      {"conversation ending with the user",
       R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]})"
       "\n",
       ":1: field 'messages': the last message must be the assistant's"},
      {"empty conversation",
       R"({"messages": []})"
       "\n",
       ":1: field 'messages': empty conversation"},
      {"empty file", "", ": dataset has no examples"},
      {"only blank lines", "\n  \n\t\n", ": dataset has no examples"},
  };
  SftSetup setup("fail");
  for (const DataCase& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const fs::path file = testing::write_text_file(dir, "data.jsonl", c.text);
      testing::check_rejected([&] { setup.load(file); }, "DataError", file.string() + c.location);
    }
  }
}

TEST_CASE("a missing dataset file names the file", "[bad_inputs][data]") {
  SftSetup setup("fail");
  const fs::path missing = testing::fresh_test_dir("bad_data") / "absent.jsonl";
  testing::check_rejected([&] { setup.load(missing); }, "DataError", missing.string() + ": cannot open dataset file");
}

TEST_CASE("data.on_error = skip leaves bad lines out, renumbers the rest and reports each", "[bad_inputs][data]") {
  const fs::path dir = testing::fresh_test_dir("bad_data_skip");
  const fs::path file = testing::write_text_file(dir, "data.jsonl",
                                                 kGood + "\n"                                      // 1 kept
                                                     + "{\"prompt\": \n"                           // 2 invalid JSON
                                                     + kGoodChat + "\n"                            // 3 kept
                                                     + "{\"prompt\": \"a\", \"completion\": 7}\n"  // 4 a number
                                                     + "\n"                                        // 5 blank
                                                     + kGood + "\n");                              // 6 kept
  SftSetup setup("skip");
  std::vector<std::string> skipped;
  const std::vector<sdk::Example> examples = setup.load(file, &skipped);
  REQUIRE(examples.size() == 3);
  CHECK(examples[0].location == file.string() + ":1");
  CHECK(examples[1].location == file.string() + ":3");
  CHECK(examples[2].location == file.string() + ":6");
  for (size_t i = 0; i < examples.size(); ++i) CHECK(examples[i].index == static_cast<int64_t>(i));
  REQUIRE(skipped.size() == 2);
  CHECK_THAT(skipped[0], Catch::StartsWith(file.string() + ":2: invalid JSON"));
  CHECK_THAT(skipped[1], Catch::StartsWith(file.string() + ":4: field 'completion': expected a string"));

  // The same file fails at its first bad line under "fail".
  SftSetup failing("fail");
  testing::check_rejected([&] { failing.load(file); }, "DataError", file.string() + ":2: invalid JSON");

  // Nothing usable left is still an error, naming the first reason.
  const fs::path all_bad = testing::write_text_file(dir, "bad.jsonl", "[1]\n{\"prompt\": \"a\"}\n");
  testing::check_rejected([&] { setup.load(all_bad); }, "DataError", all_bad.string() + ":1: expected a JSON object");
}

TEST_CASE("a bad held-out set ([eval] data) is refused like a bad training set", "[bad_inputs][data][eval]") {
  const fs::path dir = testing::fresh_test_dir("bad_eval_data");
  SftSetup setup("fail");
  const fs::path bad = testing::write_text_file(dir, "eval.jsonl", kGood + "\n{\"prompt\": \"a\"}\n");
  setup.config.eval.data = bad.string();
  testing::check_rejected([&] { train::load_eval_examples(setup.config, setup.module); }, "DataError",
                          bad.string() + ":2: missing field 'completion'");

  const fs::path missing = dir / "absent.jsonl";
  setup.config.eval.data = missing.string();
  testing::check_rejected([&] { train::load_eval_examples(setup.config, setup.module); }, "DataError",
                          missing.string() + ": cannot open dataset file");

  // A good one keeps its first max_examples, none of them an index into the training set.
  const fs::path good = testing::write_text_file(dir, "good.jsonl", kGood + "\n" + kGoodChat + "\n" + kGood + "\n");
  setup.config.eval.data = good.string();
  setup.config.eval.max_examples = 2;
  const std::vector<sdk::Example> examples = train::load_eval_examples(setup.config, setup.module);
  REQUIRE(examples.size() == 2);
  CHECK(examples[1].location == good.string() + ":2");
  for (const sdk::Example& example : examples) CHECK(example.index == -1);
}

TEST_CASE("an SFT dataset with no trainable token in any example is refused, naming the file", "[bad_inputs][data]") {
  const fs::path dir = testing::fresh_test_dir("bad_data_untrainable");
  // Prompts longer than data.max_length = 64: truncation leaves nothing to train on.
  const std::string long_prompt = std::string(100, 'p');
  const std::string line = "{\"prompt\": \"" + long_prompt + "\", \"completion\": \"x\"}\n";
  const std::string chat = R"({"messages": [{"role": "user", "content": ")" + long_prompt +
                           R"("}, {"role": "assistant", "content": "x"}]})" + "\n";
  SftSetup setup("fail");
  const fs::path none = testing::write_text_file(dir, "none.jsonl", line + chat + line);
  const std::vector<sdk::Example> untrainable = setup.load(none);
  testing::check_rejected([&] { setup.module.prepare_dataset(*setup.context, untrainable); }, "DataError",
                          none.string() +
                              ": none of its 3 examples has a trainable token left within "
                              "data.max_length = 64");

  // One trainable example is enough: the others are left out of their steps, with a warning.
  const fs::path some = testing::write_text_file(dir, "some.jsonl", line + kGood + "\n" + chat);
  const std::vector<sdk::Example> mixed = setup.load(some);
  CHECK_NOTHROW(setup.module.prepare_dataset(*setup.context, mixed));
}
