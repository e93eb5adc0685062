// `ptrain tokenize` end to end: plain lines, JSONL fields, chat templates with
// their loss masks, --decode, and SFT training on chat data.
#include "catch.h"

#include "support/run_command.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace fs = std::filesystem;
using nlohmann::json;
using ptrain::testing::CommandResult;
using ptrain::testing::run_ptrain;

namespace {

const fs::path kExtracted = PTRAIN_TOKENIZER_EXTRACTED_DIR;
const fs::path kFixtures = PTRAIN_TOKENIZER_FIXTURE_DIR;

fs::path write_file(const fs::path& dir, const std::string& name, const std::string& text) {
  const fs::path path = dir / name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

TEST_CASE("ptrain tokenize: bytes, one JSON array per line, and --decode back", "[e2e][tokenize]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("tokenize_bytes");
  const fs::path input = write_file(dir, "in.txt", "hi\nÄ b\n");
  const CommandResult encoded = run_ptrain("tokenize --tokenizer bytes < " + input.string() + " 2>&1");
  INFO(encoded.output);
  REQUIRE(encoded.exit_code == 0);
  CHECK(encoded.output == "[104,105]\n[195,132,32,98]\n");

  const fs::path ids = write_file(dir, "ids.txt", encoded.output);
  const CommandResult decoded = run_ptrain("tokenize --tokenizer bytes --decode < " + ids.string() + " 2>&1");
  REQUIRE(decoded.exit_code == 0);
  CHECK(decoded.output == "hi\nÄ b\n");
}

// `ptrain tokenize --jsonl text` gives the reference ids of every corpus text
// (which has newlines inside texts), and --decode gives the reference decodings.
void check_cli_matches_reference(const std::string& base, const fs::path& dir) {
  const std::string tokenizer = (kExtracted / base / "tokenizer.json").string();
  std::ifstream reference_file(kFixtures / "reference.json");
  const json reference = json::parse(reference_file).at("tokenizers").at(base);
  std::ifstream corpus_file(kFixtures / "corpus.json");
  const json corpus = json::parse(corpus_file);

  std::string jsonl;
  for (const auto& text : corpus) jsonl += json{{"text", text}}.dump() + "\n";
  const fs::path input = write_file(dir, base + "_corpus.jsonl", jsonl);
  const CommandResult encoded = run_ptrain("tokenize --tokenizer " + tokenizer + " --jsonl text < " + input.string());
  INFO(base << ": " << encoded.output.substr(0, 2000));
  REQUIRE(encoded.exit_code == 0);
  const std::vector<std::string> lines = lines_of(encoded.output);
  REQUIRE(lines.size() == corpus.size());
  for (size_t i = 0; i < lines.size(); ++i) CHECK(json::parse(lines[i]) == reference.at("ids")[i]);
  const fs::path ids = write_file(dir, base + "_ids.txt", encoded.output);
  const CommandResult decoded =
      run_ptrain("tokenize --tokenizer " + tokenizer + " --jsonl text --decode < " + ids.string());
  REQUIRE(decoded.exit_code == 0);
  const std::vector<std::string> texts = lines_of(decoded.output);
  REQUIRE(texts.size() == corpus.size());
  for (size_t i = 0; i < texts.size(); ++i) CHECK(json::parse(texts[i]).at("text") == reference.at("decoded")[i]);
}

}  // namespace

TEST_CASE("ptrain tokenize: SentencePiece-style tokenizer.json files (Mistral / Llama 2, Gemma 3) match the reference",
          "[e2e][tokenize]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("tokenize_sentencepiece");
  check_cli_matches_reference("llama2", dir);
  check_cli_matches_reference("gemma3", dir);
}

TEST_CASE("ptrain tokenize: a tokenizer.json matches the reference ids, with --jsonl and chat templates",
          "[e2e][tokenize]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("tokenize_hf");
  const std::string tokenizer = (kExtracted / "qwen3" / "tokenizer.json").string();
  std::ifstream reference_file(kFixtures / "reference.json");
  const json reference = json::parse(reference_file);
  check_cli_matches_reference("qwen3", dir);

  // Conversations: --template auto renders with Qwen3's own Jinja template
  // from tokenizer_config.json, as Hugging Face does (chat_reference.json).
  std::ifstream own_cases_file(kFixtures / "chat_template_cases.json");
  const json own_cases = json::parse(own_cases_file);
  std::ifstream chat_reference_file(kFixtures / "chat_reference.json");
  std::vector<json> qwen_renders;
  const json renders = json::parse(chat_reference_file).at("renders");
  for (const json& r : renders) {
    if (r.at("template") == "qwen3") qwen_renders.push_back(r);
  }
  REQUIRE(qwen_renders.size() == own_cases.size());
  std::string own_chats;
  for (const auto& c : own_cases) own_chats += json{{"messages", c.at("messages")}}.dump() + "\n";
  const fs::path own_input = write_file(dir, "own_chats.jsonl", own_chats);
  const std::string auto_command = "tokenize --tokenizer " + tokenizer + " --template auto";
  const CommandResult own_ids = run_ptrain(auto_command + " < " + own_input.string());
  const CommandResult rendered = run_ptrain(auto_command + " --render < " + own_input.string());
  const CommandResult prompted = run_ptrain(auto_command + " --render --generation-prompt < " + own_input.string());
  REQUIRE(own_ids.exit_code == 0);
  REQUIRE(rendered.exit_code == 0);
  REQUIRE(prompted.exit_code == 0);
  const std::vector<std::string> id_lines = lines_of(own_ids.output), text_lines = lines_of(rendered.output),
                                 prompt_lines = lines_of(prompted.output);
  REQUIRE(id_lines.size() == own_cases.size());
  REQUIRE(text_lines.size() == own_cases.size());
  REQUIRE(prompt_lines.size() == own_cases.size());
  for (size_t i = 0; i < own_cases.size(); ++i) {
    INFO(own_cases[i].at("name"));
    CHECK(json::parse(id_lines[i]) == qwen_renders[i].at("qwen3_ids"));
    CHECK(json::parse(text_lines[i]) == qwen_renders[i].at("text").at("text"));
    CHECK(json::parse(prompt_lines[i]) == qwen_renders[i].at("generation").at("text"));
  }

  std::ifstream cases_file(kFixtures / "chat_cases.json");
  const json cases = json::parse(cases_file);
  std::string chats;
  for (const auto& c : cases) chats += json{{"messages", c.at("messages")}}.dump() + "\n";
  const fs::path chat_input = write_file(dir, "chats.jsonl", chats);
  const CommandResult chat =
      run_ptrain("tokenize --tokenizer " + tokenizer + " --template chatml < " + chat_input.string());
  REQUIRE(chat.exit_code == 0);
  const std::vector<std::string> chat_lines = lines_of(chat.output);
  REQUIRE(chat_lines.size() == cases.size());
  for (size_t i = 0; i < chat_lines.size(); ++i) {
    CHECK(json::parse(chat_lines[i]) == reference.at("chat").at("chatml")[i].at("qwen3_ids"));
  }
  const CommandResult masked =
      run_ptrain("tokenize --tokenizer " + tokenizer + " --template chatml --mask < " + chat_input.string());
  REQUIRE(masked.exit_code == 0);
  const json first = json::parse(lines_of(masked.output).at(0));
  // single_turn: the trained ids are "4" and <|im_end|>.
  std::vector<int64_t> trained;
  for (size_t i = 0; i < first.at("ids").size(); ++i) {
    if (first.at("trainable")[i] == 1) trained.push_back(first.at("ids")[i]);
  }
  CHECK(trained == std::vector<int64_t>{19, 151645});
}

TEST_CASE("ptrain tokenize: unknown template, bad role and bad files fail with one clear line", "[e2e][tokenize]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("tokenize_errors");
  const fs::path chat = write_file(dir, "chat.jsonl",
                                   R"({"messages": [{"role": "robot", "content": "beep"}]})"
                                   "\n");
  const CommandResult unknown = run_ptrain("tokenize --tokenizer bytes --template vicuna < " + chat.string() + " 2>&1");
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.output, Catch::Contains("unknown chat template 'vicuna'"));
  const CommandResult role = run_ptrain("tokenize --tokenizer bytes --template plain < " + chat.string() + " 2>&1");
  CHECK(role.exit_code == 2);
  CHECK_THAT(role.output, Catch::Contains("stdin:1") && Catch::Contains("unknown role \"robot\""));
  const fs::path broken = write_file(dir, "tokenizer.json", "{\"model\": [");
  const CommandResult bad = run_ptrain("tokenize --tokenizer " + broken.string() + " < " + chat.string() + " 2>&1");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains(broken.string()) && Catch::Contains("not valid JSON"));
  const CommandResult no_template = run_ptrain("tokenize --tokenizer bytes --render < " + chat.string() + " 2>&1");
  CHECK(no_template.exit_code == 2);
  CHECK_THAT(no_template.output, Catch::Contains("--render apply to conversations: add --template NAME"));
  const CommandResult not_ids = run_ptrain("tokenize --tokenizer bytes --decode < " + chat.string() + " 2>&1");
  CHECK(not_ids.exit_code == 2);
  CHECK_THAT(not_ids.output, Catch::Contains("stdin:1: expected a JSON array of token ids"));
}

TEST_CASE("ptrain train: SFT on chat data with the plain template, skipping examples with nothing to learn",
          "[e2e][tokenize]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("chat_sft");
  std::string data;
  for (int i = 0; i < 24; ++i) {
    const std::string a = std::to_string(i % 7), b = std::to_string(i % 5);
    json messages = json::array();
    if (i % 6 == 0) {  // a long system message: the assistant turn is truncated away
      messages.push_back(json{{"role", "system"}, {"content", std::string(40, 'x')}});
    }
    messages.push_back(json{{"role", "user"}, {"content", a + "+" + b + "="}});
    messages.push_back(json{{"role", "assistant"}, {"content", std::to_string(i % 7 + i % 5)}});
    data += json{{"messages", messages}}.dump() + "\n";
  }
  const fs::path train = write_file(dir, "train.jsonl", data);
  const fs::path config =
      write_file(dir, "chat.toml",
                 "plugin = \"sft\"\nseed = 1\noutput_dir = \"" + (dir / "run").string() +
                     "\"\n"
                     "[model]\nvocab_size = 259\nhidden_size = 32\nintermediate_size = 64\nnum_layers = 1\n"
                     "num_heads = 2\nnum_kv_heads = 1\nmax_position_embeddings = 32\n"
                     "[tokenizer]\nkind = \"bytes\"\nchat_template = \"plain\"\n"
                     "[data]\ntrain = \"" +
                     train.string() +
                     "\"\nmax_length = 32\n"
                     "[batch]\nglobal_size = 8\n[train]\nmax_steps = 6\n"
                     "[module]\nassistant_only_loss = true\n");
  const CommandResult result = run_ptrain("train -c " + config.string() + " 2>&1");
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.output, Catch::Contains("4 of 24 examples have no trainable token"));
  CHECK(fs::exists(dir / "run" / "token_cache"));
  double skipped = 0;
  std::ifstream metrics(dir / "run" / "metrics.jsonl");
  std::string line;
  while (std::getline(metrics, line)) skipped += json::parse(line).value("skipped_examples", 0.0);
  CHECK(skipped > 0);
}
