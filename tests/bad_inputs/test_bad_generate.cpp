// `ptrain generate` and `ptrain eval` given what they cannot use, through the
// executable: each refused with exit code 2 and a message naming the option,
// file:line or path at fault, and an existing --output file left as it was.
#include "catch.h"

#include "support/run_command.h"
#include "support/test_util.h"

#include "core/io/read_file.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace ptrain;
namespace fs = std::filesystem;
using testing::CommandResult;

namespace {

struct GenerateCase {
  const char* name;
  std::string arguments;  // after "ptrain "
  std::string expected;   // in the one error line
};

// A model directory, an adapter-like directory without a base, and prompt files.
struct Inputs {
  fs::path dir;
  fs::path model;
  fs::path prompts;
  fs::path empty_prompts;
  fs::path no_prompt_field;
  fs::path no_answer;
  fs::path adapter;
};

Inputs make_inputs() {
  Inputs in;
  in.dir = testing::fresh_test_dir("bad_generate");
  in.model = in.dir / "model";
  testing::write_byte_model_dir(in.model, 3);
  in.prompts = testing::write_text_file(in.dir, "prompts.jsonl", "{\"prompt\": \"1+1=\", \"answer\": \"2\"}\n");
  in.empty_prompts = testing::write_text_file(in.dir, "empty.jsonl", "\n  \n");
  in.no_prompt_field = testing::write_text_file(
      in.dir, "no_prompt.jsonl", "{\"prompt\": \"1+1=\", \"answer\": \"2\"}\n{\"question\": \"2+2=\"}\n");
  in.no_answer = testing::write_text_file(in.dir, "no_answer.jsonl",
                                          "{\"prompt\": \"1+1=\", \"answer\": \"2\"}\n{\"prompt\": \"2+2=\"}\n");
  in.adapter = in.dir / "adapter";
  testing::write_text_file(in.adapter, "adapter_config.json",
                           "{\"peft_type\": \"LORA\", \"r\": 2, \"lora_alpha\": 4, \"target_modules\": [\"q_proj\"], "
                           "\"bias\": \"none\", \"base_model_name_or_path\": \"/nowhere/base\"}\n");
  return in;
}

std::vector<GenerateCase> generate_cases(const Inputs& in) {
  const std::string model = " -m " + in.model.string();
  const std::string prompts = " --prompts " + in.prompts.string();
  return {
      {"a missing model", "generate -m " + (in.dir / "missing").string() + prompts,
       "--model " + (in.dir / "missing").string() + ": no such directory"},
      {"a directory that is no model", "generate -m " + in.dir.string() + prompts,
       "--model " + in.dir.string() + ": not a model directory (no config.json), a LoRA adapter"},
      {"an adapter without its base", "generate -m " + in.adapter.string() + prompts,
       in.adapter.string() + " is a LoRA adapter: give its base model with --base DIR (its adapter_config.json's "
                             "base_model_name_or_path '/nowhere/base' is not a model directory here)"},
      {"--base for a model that is no adapter", "generate" + model + " --base " + in.model.string() + prompts,
       "--base " + in.model.string() + " is for a LoRA adapter, and " + in.model.string() + " is not one"},
      {"no prompts", "generate" + model, "give the prompts with --prompt TEXT (repeatable) or --prompts FILE.jsonl"},
      {"prompts twice", "generate" + model + prompts + " --prompt hi", "give the prompts with --prompt TEXT"},
      {"an empty prompt file", "generate" + model + " --prompts " + in.empty_prompts.string(),
       in.empty_prompts.string() + ": dataset has no examples"},
      {"a missing prompt file", "generate" + model + " --prompts " + (in.dir / "nope.jsonl").string(),
       (in.dir / "nope.jsonl").string() + ": cannot open dataset file"},
      {"a line without a prompt", "generate" + model + " --prompts " + in.no_prompt_field.string(),
       in.no_prompt_field.string() + ":2: missing field 'prompt'"},
      {"n = 0", "generate" + model + prompts + " --n 0", "--n 0: must be at least 1"},
      {"a negative temperature", "generate" + model + prompts + " --temperature -1", "--temperature -1: must be >= 0"},
      {"a negative top-k", "generate" + model + prompts + " --top-k -1", "--top-k -1: must be >= 0"},
      {"a negative batch size", "generate" + model + prompts + " --batch-size -2", "--batch-size -2: must be >= 0"},
      {"a base that is no model", "generate -m " + in.adapter.string() + " --base " + in.dir.string() + prompts,
       "--base " + in.dir.string() + ": not a model directory (no config.json)"},
      {"a negative max-examples", "eval" + model + " -d " + in.prompts.string() + " --max-examples -1",
       "--max-examples -1: must be >= 0"},
      {"top-p 0", "generate" + model + prompts + " --top-p 0", "--top-p 0: must be in (0, 1]"},
      {"min-p 1", "generate" + model + prompts + " --min-p 1", "--min-p 1: must be in [0, 1)"},
      {"a zero repetition penalty", "generate" + model + prompts + " --repetition-penalty 0",
       "--repetition-penalty 0: must be > 0"},
      {"no new tokens", "generate" + model + prompts + " --max-new-tokens 0", "--max-new-tokens 0: must be at least 1"},
      {"an empty stop string", "generate" + model + prompts + " --stop ''", "--stop: an empty stop string"},
      {"an unknown format", "generate" + model + prompts + " --format csv", "--format csv: expected text or jsonl"},
      {"logprobs in text", "generate" + model + prompts + " --logprobs", "--logprobs: the text format has no place"},
      {"an unknown device", "generate" + model + prompts + " --device tpu", "--device tpu: expected auto or cpu"},
      {"unknown CPU kernels", "generate" + model + prompts + " --cpu-kernels sse", "--cpu-kernels sse: expected"},
      {"an output in a missing directory", "generate" + model + prompts + " -o " + (in.dir / "no/out.jsonl").string(),
       "--output " + (in.dir / "no/out.jsonl").string() + ": no directory"},
      {"an unknown reward", "eval" + model + " -d " + in.prompts.string() + " -r accuracy -r acuracy",
       "--reward acuracy: unknown reward function 'acuracy' (the built-in ones: accuracy, format, length, closeness)"},
      {"a reward given twice", "eval" + model + " -d " + in.prompts.string() + " -r accuracy -r accuracy",
       "--reward accuracy: a second reward named 'accuracy'"},
      {"a Python reward without its function", "eval" + model + " -d " + in.prompts.string() + " -r python:r.py",
       "--reward python:r.py: 'python:r.py': expected python:FILE.py:FUNCTION"},
      {"a bad format pattern", "eval" + model + " -d " + in.prompts.string() + " -r format --format-pattern '(['",
       "--reward format: format_pattern '([' is not a valid regex"},
      {"an answer missing", "eval" + model + " -d " + in.no_answer.string(),
       in.no_answer.string() + ":2: no field 'answer', which the accuracy and closeness rewards compare with"},
      {"no data", "eval" + model, "the option '--data' is required"},
      {"an empty eval file", "eval" + model + " -d " + in.empty_prompts.string(),
       in.empty_prompts.string() + ": dataset has no examples"},
      {"n = 0 in eval", "eval" + model + " -d " + in.prompts.string() + " --n 0", "--n 0: must be at least 1"},
  };
}

}  // namespace

TEST_CASE("ptrain generate and eval refuse bad input naming the option, file:line or path", "[bad_inputs][generate]") {
  const Inputs in = make_inputs();
  const fs::path kept = testing::write_text_file(in.dir, "kept.jsonl", "my earlier output\n");
  for (const GenerateCase& bad : generate_cases(in)) {
    DYNAMIC_SECTION(bad.name) {
      const bool own_output = bad.arguments.find(" -o ") != std::string::npos;
      const CommandResult result =
          testing::run_ptrain(bad.arguments + (own_output ? "" : " -o " + kept.string()) + " 2>&1");
      INFO(result.output);
      CHECK(result.exit_code == 2);
      CHECK_THAT(result.output, Catch::Contains(bad.expected));
      CHECK(io::read_file(kept) == "my earlier output\n");
    }
  }
}

TEST_CASE("ptrain generate runs on the bad-input suite's model (the cases above fail for their reason only)",
          "[bad_inputs][generate]") {
  const Inputs in = make_inputs();
  const CommandResult result =
      testing::run_ptrain("generate -m " + in.model.string() + " --prompts " + in.prompts.string() + " 2>&1");
  INFO(result.output);
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.output, Catch::Contains("[1] 1+1="));
}
