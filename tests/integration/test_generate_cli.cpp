// `ptrain generate` and `ptrain eval` end to end on a trained run: seeded
// completions that do not depend on the batch size, the world size or how
// the prompts were given; eval means that equal a reference recomputed from
// the completions; a LoRA adapter that generates as its merged model does.
#include "catch.h"

#include "integration/small_sft_run.h"
#include "support/run_command.h"
#include "support/test_util.h"

#include "core/io/read_file.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace ptrain;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kTestData = std::string(PTRAIN_SOURCE_DIR) + "/data/arith/test.jsonl";

// A 60-step SFT run's directory (its final/ is what --model finds): its
// answers are numbers, some of them near the right one.
fs::path trained_run(const fs::path& dir) {
  const fs::path config = testing::write_small_sft_config(dir, "sft", 1e-2, 60);
  const testing::CommandResult run = testing::run_ptrain("train -c " + config.string() + " 2>&1");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  return dir / "sft";
}

// `ptrain ARGUMENTS`, required to succeed; the file it wrote with -o.
std::string output_of(const std::string& arguments, const fs::path& output) {
  const testing::CommandResult result = testing::run_ptrain(arguments + " -o " + output.string() + " 2>&1");
  INFO(arguments << "\n" << result.output);
  REQUIRE(result.exit_code == 0);
  return io::read_file(output);
}

std::vector<json> jsonl_lines(const std::string& text) {
  std::vector<json> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(json::parse(line));
  return lines;
}

std::string trimmed(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t\r\n") - begin + 1);
}

// The definitions of docs/generation.md, computed here from the texts alone.
double reference_accuracy(const std::string& completion, const std::string& answer) {
  return trimmed(completion) == trimmed(answer) ? 1.0 : 0.0;
}

double reference_closeness(const std::string& completion, const std::string& answer) {
  auto number = [](const std::string& text, double& value) {
    const std::string t = trimmed(text);
    const bool digits = !t.empty() && std::all_of(t.begin() + (t[0] == '-' ? 1 : 0), t.end(),
                                                  [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || t == "-") return false;
    value = std::stod(t);
    return true;
  };
  double y = 0.0, a = 0.0;
  if (!number(completion, y) || !number(answer, a)) return 0.0;
  return std::max(0.0, 1.0 - std::abs(y - a) / 10.0);
}

}  // namespace

TEST_CASE("ptrain generate: a seeded generation is the same whatever the batch size, world size and prompt source",
          "[integration][generate]") {
  const fs::path dir = testing::fresh_test_dir("generate_cli");
  const fs::path run = trained_run(dir);
  const std::string settings = " --format jsonl --logprobs --n 3 --temperature 1 --max-new-tokens 6 --prompts " + kTestData;
  const std::string sampled = "generate -m " + run.string() + settings + " --seed 5";
  const std::string whole = output_of(sampled, dir / "whole.jsonl");
  const std::vector<json> lines = jsonl_lines(whole);
  REQUIRE(lines.size() == 600u);
  size_t varied = 0;  // prompts whose three completions are not all one
  for (size_t i = 0; i < lines.size(); i += 3) {
    const std::set<std::string> texts{lines[i].at("completion"), lines[i + 1].at("completion"),
                                      lines[i + 2].at("completion")};
    varied += texts.size() > 1 ? 1 : 0;
  }
  for (const json& line : lines) {
    CHECK(line.at("logprobs").size() == line.at("completion_ids").size());
    CHECK(line.at("completion_tokens") == line.at("completion_ids").size());
  }

  CHECK(output_of(sampled + " --batch-size 1", dir / "one_by_one.jsonl") == whole);
  CHECK(output_of(sampled + " --batch-size 7", dir / "sevens.jsonl") == whole);
  CHECK(output_of("launch --nproc 2 -- " + sampled, dir / "two_ranks.jsonl") == whole);
  CHECK(output_of("launch --nproc 3 -- " + sampled + " --batch-size 2", dir / "three_ranks.jsonl") == whole);
  // Sampling, not one answer three times: the seed decides, the batch does not.
  CHECK(varied > 0);
  const std::string other_seed = output_of("generate -m " + run.string() + settings + " --seed 6", dir / "seed6.jsonl");
  CHECK(other_seed != whole);

  // The first two test prompts given on the command line, and on stdin.
  const std::string two = "generate -m " + run.string() + " --format jsonl --n 3 --temperature 1 --seed 5 "
                          "--max-new-tokens 6";
  const std::vector<json> cli = jsonl_lines(output_of(two + " --prompt 7+11= --prompt 94-21=", dir / "cli.jsonl"));
  const fs::path head = testing::write_text_file(
      dir, "head.jsonl", "{\"prompt\": \"7+11=\", \"completion\": \"18\"}\n{\"prompt\": \"94-21=\"}\n");
  const std::vector<json> piped = jsonl_lines(output_of(two + " --prompts - < " + head.string(), dir / "stdin.jsonl"));
  REQUIRE(cli.size() == 6u);
  REQUIRE(piped.size() == 6u);
  for (size_t i = 0; i < 6; ++i) {
    CHECK(cli[i].at("completion_ids") == lines[i].at("completion_ids"));
    CHECK(piped[i].at("completion_ids") == lines[i].at("completion_ids"));
    CHECK(piped[i].at("source") == "stdin:" + std::to_string(i / 3 + 1));
  }
}

TEST_CASE("ptrain generate: text for a person, and chat prompts through the model's own template",
          "[integration][generate]") {
  const fs::path dir = testing::fresh_test_dir("generate_text");
  const fs::path run = trained_run(dir);
  const testing::CommandResult text =
      testing::run_ptrain("generate -m " + run.string() + " --temperature 0 --max-new-tokens 4 --prompt 7+11= 2>&1");
  REQUIRE(text.exit_code == 0);
  CHECK_THAT(text.output, Catch::Contains("\n[1] 7+11=\n  -> "));
  CHECK_THAT(text.output, Catch::Contains(" tokens)"));

  const fs::path chat = testing::write_text_file(
      dir, "chat.jsonl", "{\"messages\": [{\"role\": \"user\", \"content\": \"7+11=\"}]}\n");
  const std::vector<json> lines = jsonl_lines(output_of(
      "generate -m " + run.string() + " --format jsonl --temperature 0 --max-new-tokens 4 --prompts " + chat.string(),
      dir / "chat_out.jsonl"));
  REQUIRE(lines.size() == 1u);
  // The run's plain template: "<bos>" then the user's text (docs/tokenizers.md).
  CHECK(lines[0].at("prompt_ids").front() == 256);
  CHECK_THAT(lines[0].at("prompt").get<std::string>(), Catch::Contains("7+11="));
}

TEST_CASE("ptrain eval: reward means equal a reference computed from the completions, for any world size",
          "[integration][generate][eval]") {
  const fs::path dir = testing::fresh_test_dir("eval_cli");
  const fs::path run = trained_run(dir);
  const std::string eval = "eval -m " + run.string() + " -d " + kTestData +
                           " -r accuracy -r closeness --n 2 --temperature 1 --seed 9 --max-new-tokens 6";
  const std::string one = output_of(eval, dir / "one.json");
  CHECK(output_of("launch --nproc 2 -- " + eval, dir / "two.json") == one);

  const json result = json::parse(one);
  const std::vector<json> data = jsonl_lines(io::read_file(kTestData));
  REQUIRE(result.at("completions").size() == 2 * data.size());
  double accuracy = 0.0, closeness = 0.0;
  for (const json& completion : result.at("completions")) {
    const std::string source = completion.at("source");
    const size_t line = std::stoul(source.substr(source.rfind(':') + 1));
    const std::string answer = data.at(line - 1).at("completion");
    const std::string text = completion.at("completion");
    accuracy += reference_accuracy(text, answer);
    closeness += reference_closeness(text, answer);
    CHECK(completion.at("rewards").at("accuracy") == reference_accuracy(text, answer));
  }
  const double count = static_cast<double>(result.at("completions").size());
  CHECK(result.at("means").at("accuracy").get<double>() == Approx(accuracy / count).epsilon(1e-12));
  CHECK(result.at("means").at("closeness").get<double>() == Approx(closeness / count).epsilon(1e-12));
  CHECK(closeness > 0.0);  // the reference is not vacuous

  // The completions scored are those `ptrain generate` gives for the same settings.
  const std::vector<json> generated = jsonl_lines(output_of(
      "generate -m " + run.string() + " --prompts " + kTestData +
          " --format jsonl --n 2 --temperature 1 --seed 9 --max-new-tokens 6",
      dir / "generated.jsonl"));
  REQUIRE(generated.size() == result.at("completions").size());
  for (size_t i = 0; i < generated.size(); ++i) {
    CHECK(generated[i].at("completion") == result.at("completions")[i].at("completion"));
  }
}

TEST_CASE("ptrain generate: a LoRA adapter on its base generates as its merged model does",
          "[integration][generate][lora]") {
  const fs::path dir = testing::fresh_test_dir("generate_lora");
  const fs::path base = dir / "base";
  testing::write_byte_model_dir(base, 4);
  const fs::path config = dir / "lora.toml";
  std::ofstream(config) << "plugin = \"sft\"\nseed = 2\noutput_dir = \"" << (dir / "lora").string() << "\"\n"
                        << "[model]\ninit = \"" << base.string() << "\"\n"
                        << "[data]\ntrain = \"" << kTestData << "\"\nmax_length = 16\n"
                        << "[batch]\nglobal_size = 8\n[optim]\nlr = 5e-2\n[train]\nmax_steps = 6\n"
                        << "[lora]\nrank = 4\nalpha = 8.0\nsave_merged = true\n[runtime]\nthreads = 1\n";
  const testing::CommandResult trained = testing::run_ptrain("train -c " + config.string() + " 2>&1");
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);

  const std::string greedy = " --format jsonl --logprobs --temperature 0 --max-new-tokens 6 --prompts " + kTestData;
  const fs::path adapter = dir / "lora" / "final";
  const std::vector<json> on_its_base = jsonl_lines(output_of("generate -m " + adapter.string() + greedy, dir / "a.jsonl"));
  const std::string named = output_of("generate -m " + adapter.string() + " --base " + base.string() + greedy, dir / "b.jsonl");
  const std::vector<json> merged = jsonl_lines(output_of("generate -m " + (adapter / "merged").string() + greedy,
                                                         dir / "merged.jsonl"));
  const std::vector<json> plain = jsonl_lines(output_of("generate -m " + base.string() + greedy, dir / "base.jsonl"));
  CHECK(jsonl_lines(named) == on_its_base);
  REQUIRE(merged.size() == on_its_base.size());
  double largest_gap = 0.0;
  size_t changed = 0;  // prompts whose greedy completion or its first log-probability the adapter moved
  for (size_t i = 0; i < merged.size(); ++i) {
    REQUIRE(merged[i].at("completion_ids") == on_its_base[i].at("completion_ids"));
    for (size_t t = 0; t < merged[i].at("logprobs").size(); ++t) {
      const double ours = on_its_base[i].at("logprobs")[t];
      largest_gap = std::max(largest_gap, std::abs(ours - merged[i].at("logprobs")[t].get<double>()));
    }
    const bool same_tokens = plain[i].at("completion_ids") == on_its_base[i].at("completion_ids");
    if (!same_tokens || std::abs(plain[i].at("logprobs")[0].get<double>() -
                                 on_its_base[i].at("logprobs")[0].get<double>()) > 1e-3) {
      ++changed;
    }
  }
  CHECK(largest_gap < 1e-4);     // W + (alpha / r)·B·A folded in, or applied as adapters: the same model
  CHECK(changed > 0);  // and the adapter changed the base: the comparison proves something
}

TEST_CASE("eval.rewards: eval/<reward> during training equals ptrain eval on the saved model, on one rank or two",
          "[integration][generate][eval]") {
  const fs::path dir = testing::fresh_test_dir("eval_rewards_run");
  const fs::path config = testing::write_small_sft_config(dir, "sft", 1e-2, 40);
  std::ofstream(config, std::ios::app) << "[eval]\ndata = \"" << kTestData << "\"\nevery_steps = 20\nmax_examples = 50\n"
                                       << "rewards = [\"accuracy\", \"closeness\"]\nnum_generations = 2\n"
                                       << "temperature = 1.0\nmax_new_tokens = 6\n"
                                       << "[checkpoint]\nbest_metric = \"eval/closeness\"\nbest_mode = \"max\"\n";
  const std::string scored = " -d " + kTestData + " --max-examples 50 -r accuracy -r closeness --n 2 --temperature 1 "
                             "--max-new-tokens 6 --seed 1 --cpu-kernels native";
  for (const char* launch : {"", "launch --nproc 2 -- "}) {
    DYNAMIC_SECTION((*launch ? "two ranks" : "one rank")) {
      const fs::path run = dir / (*launch ? "two" : "one");
      const testing::CommandResult trained = testing::run_ptrain(std::string(launch) + "train -c " + config.string() +
                                                                 " --set output_dir=" + run.string() + " 2>&1");
      INFO(trained.output);
      REQUIRE(trained.exit_code == 0);
      CHECK(testing::contains(trained.output, "eval/closeness"));
      const std::vector<json> records = testing::read_metrics_jsonl(run / "metrics.jsonl");
      REQUIRE(records.size() == 40u);
      CHECK(records[19].contains("eval/accuracy"));
      CHECK(records[19].contains("eval/closeness"));
      CHECK_FALSE(records[18].contains("eval/closeness"));
      const json evaluated = json::parse(output_of("eval -m " + run.string() + scored, dir / "eval.json"));
      CHECK(records[39].at("eval/accuracy") == evaluated.at("means").at("accuracy"));
      CHECK(records[39].at("eval/closeness") == evaluated.at("means").at("closeness"));
      CHECK(fs::exists(run / "best" / "model.safetensors"));

      // The samples of each evaluation: the first prompts' first completions, as ptrain eval scored them.
      const std::vector<json> samples = jsonl_lines(io::read_file(run / "eval_samples.jsonl"));
      REQUIRE(samples.size() == 2u);
      CHECK(samples[0].at("step") == 20);
      REQUIRE(samples[1].at("samples").size() == 4u);
      for (size_t i = 0; i < 4; ++i) {
        const json& scored = evaluated.at("completions")[2 * i];  // generation 0 of prompt i
        CHECK(samples[1].at("samples")[i].at("completion") == scored.at("completion"));
        CHECK(samples[1].at("samples")[i].at("rewards") == scored.at("rewards"));
      }
    }
  }
}
