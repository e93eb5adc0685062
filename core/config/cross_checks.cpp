#include "core/config/cross_checks.h"

#include "core/config/byte_size.h"
#include "core/config/core_sections.h"
#include "core/config/key_suggestions.h"

#include <algorithm>
#include <filesystem>

namespace ptrain::config {

using sdk::ConfigKey;
using sdk::ConfigValues;

namespace {

// Cross-key rules over the validated sections. Keys that failed validation
// are absent, so every rule first checks has() and stays quiet about them.
class CrossChecks {
 public:
  CrossChecks(std::map<std::string, ConfigValues>& values, ProblemList& problems, const std::string& file,
              WrittenKeys written)
      : v_(values), problems_(problems), file_(file), written_(written) {}

  void run() {
    check_output_dir();
    check_model();
    check_tokenizer();
    check_batch();
    check_optim();
    check_schedule_and_train();
    check_checkpoint();
    check_eval();
    check_distributed();
    check_lora();
  }

 private:
  ConfigValues& sec(const std::string& name) { return v_[name]; }
  bool has(const std::string& s, const std::string& k) { return sec(s).has(k); }
  bool user(const std::string& s, const std::string& k) { return sec(s).set_by_user(k); }
  int64_t i(const std::string& s, const std::string& k) { return sec(s).get_int(k); }
  const std::string& str(const std::string& s, const std::string& k) { return sec(s).get_string(k); }

  std::string location(const std::string& s, const std::string& k) {
    const auto& entries = sec(s).entries();
    const auto it = entries.find(k);
    return it == entries.end() ? std::string() : it->second.location;
  }

  // "'model.num_heads' = 3 (x.toml:7)" or "... (default)".
  std::string describe(const std::string& s, const std::string& k) {
    const auto& entry = sec(s).entries().at(k);
    return "'" + full_name(s, k) + "' = " + sdk::format_config_value(entry.value) + " (" + entry.location + ")";
  }

  // A rule about two keys is reported at whichever of them the user wrote.
  void report(const std::string& s1, const std::string& k1, const std::string& s2, const std::string& k2,
              const std::string& message) {
    std::string loc = file_;
    if (user(s1, k1)) {
      loc = location(s1, k1);
    } else if (user(s2, k2)) {
      loc = location(s2, k2);
    }
    problems_.add(loc, message);
  }

  // A key the chosen option ignores would be a silent no-op; reject it.
  // Its default value is allowed, so a resolved config (which lists every
  // key) loads again.
  void reject_unused(const std::string& s, const std::string& k, const std::string& s_option,
                     const std::string& k_option, const std::string& applies_to) {
    // A key that failed its own checks has no entry (its problem is already recorded).
    if (!user(s, k)) return;
    const ConfigKey* spec = find_core_section(s) ? find_core_section(s)->find(k) : nullptr;
    const bool is_default = spec && spec->default_value && sec(s).entries().at(k).value == *spec->default_value;
    if (!is_default)
      problems_.add(location(s, k), "key '" + full_name(s, k) + "' only applies to " + applies_to + ", but " +
                                        describe(s_option, k_option) + "; remove it");
  }

  // The shell expands "~" only unquoted; in a config it would be a folder
  // named "~" in the working directory, one `rm -r ~` away from disaster.
  void check_output_dir() {
    if (!has("", "output_dir") || str("", "output_dir").rfind('~', 0) != 0) return;
    problems_.add(location("", "output_dir"),
                  describe("", "output_dir") + ": ptrain does not expand '~'; write the full path of the folder");
  }

  void check_model() {
    if (has("model", "init")) {
      std::vector<std::string> conflicting;
      for (const auto& k : model_size_keys()) {
        if (user("model", k)) conflicting.push_back("'model." + k + "' (" + location("model", k) + ")");
      }
      if (!conflicting.empty()) {
        problems_.add(location("model", "init"), "key 'model.init' cannot be combined with " + join(conflicting, ", ") +
                                                     ": the sizes come from " + str("model", "init") +
                                                     "/config.json; remove the size keys or remove init");
      }
      // The defaulted sizes do not describe the model; drop them so nothing
      // reads them and to_toml does not write them.
      ConfigValues kept("model");
      for (const auto& [k, entry] : sec("model").entries()) {
        const auto& sizes = model_size_keys();
        if (std::find(sizes.begin(), sizes.end(), k) == sizes.end())
          kept.set(k, entry.value, entry.location, entry.set_by_user);
      }
      sec("model") = std::move(kept);
      return;
    }
    if (has("model", "head_dim") && i("model", "head_dim") > 0) {
      // An explicit head width replaces hidden_size / num_heads.
      if (i("model", "head_dim") % 2 != 0) {
        problems_.add(location("model", "head_dim"),
                      describe("model", "head_dim") + " must be even for rotary embeddings");
      }
    } else if (has("model", "hidden_size") && has("model", "num_heads")) {
      const int64_t hidden = i("model", "hidden_size"), heads = i("model", "num_heads");
      if (hidden % heads != 0) {
        report("model", "hidden_size", "model", "num_heads",
               describe("model", "hidden_size") + " is not divisible by " + describe("model", "num_heads"));
      } else if ((hidden / heads) % 2 != 0) {
        report("model", "hidden_size", "model", "num_heads",
               "head dimension " + describe("model", "hidden_size") + " / " + describe("model", "num_heads") + " = " +
                   std::to_string(hidden / heads) + " must be even for rotary embeddings");
      }
    }
    if (has("model", "num_heads") && has("model", "num_kv_heads") &&
        i("model", "num_heads") % i("model", "num_kv_heads") != 0) {
      report("model", "num_kv_heads", "model", "num_heads",
             describe("model", "num_heads") + " is not divisible by " + describe("model", "num_kv_heads") +
                 " (grouped-query attention shares each key/value head among num_heads / num_kv_heads query heads)");
    }
    if (has("data", "max_length") && has("model", "max_position_embeddings") &&
        i("data", "max_length") > i("model", "max_position_embeddings")) {
      report("data", "max_length", "model", "max_position_embeddings",
             describe("data", "max_length") + " exceeds " + describe("model", "max_position_embeddings") +
                 "; shorten sequences or build a longer model");
    }
  }

  void check_tokenizer() {
    const bool path = has("tokenizer", "path");
    if (!has("tokenizer", "kind")) {
      // A kind with a bad choice is absent here too; it must not be replaced by a guess.
      if (!written_.tokenizer_kind) {
        sec("tokenizer").set("kind", std::string(path ? "hf" : "bytes"), kDefaultLocation, false);
      }
    } else if (str("tokenizer", "kind") == "hf" && !path) {
      problems_.add(location("tokenizer", "kind"),
                    "key 'tokenizer.kind' = \"hf\" needs 'tokenizer.path' (the tokenizer.json to load)");
    } else if (str("tokenizer", "kind") == "bytes" && path) {
      problems_.add(
          location("tokenizer", "path"),
          "key 'tokenizer.path' is ignored by " + describe("tokenizer", "kind") + "; remove path or set kind = \"hf\"");
    }
    // The chat_* keys describe a custom template; with a named one they would be ignored.
    if (has("tokenizer", "chat_template")) {
      const bool custom = str("tokenizer", "chat_template") == "custom";
      for (const char* k :
           {"chat_begin", "chat_system_prefix", "chat_system_suffix", "chat_user_prefix", "chat_user_suffix",
            "chat_assistant_prefix", "chat_assistant_suffix", "chat_turn_separator", "chat_trim_content"}) {
        if (!custom)
          reject_unused("tokenizer", k, "tokenizer", "chat_template", "tokenizer.chat_template = \"custom\"");
      }
      for (const char* k : {"chat_user_prefix", "chat_assistant_prefix", "chat_assistant_suffix"}) {
        if (custom && !has("tokenizer", k)) {
          problems_.add(location("tokenizer", "chat_template"),
                        std::string("key 'tokenizer.chat_template' = \"custom\" needs 'tokenizer.") + k +
                            "' (a custom template needs user and assistant prefixes and the assistant "
                            "end-of-turn text)");
        }
      }
    }
    // Ids 0-255 are bytes and 256-258 are <bos>, <eos>, <pad> (docs/file-formats.md#the-byte-tokenizer).
    if (has("tokenizer", "kind") && str("tokenizer", "kind") == "bytes" && !has("model", "init") &&
        has("model", "vocab_size") && i("model", "vocab_size") < 259) {
      report("model", "vocab_size", "tokenizer", "kind",
             describe("model", "vocab_size") + " is too small for " + describe("tokenizer", "kind") +
                 ", which needs >= 259 ids (256 bytes + bos, eos, pad)");
    }
  }

  void check_batch() {
    const bool size = has("batch", "micro_size"), tokens = has("batch", "micro_tokens");
    if (size && tokens) {
      report("batch", "micro_tokens", "batch", "micro_size",
             "keys " + describe("batch", "micro_size") + " and " + describe("batch", "micro_tokens") +
                 " are both set; a microbatch is sized by examples or by tokens, choose one");
    } else if (!size && !tokens && has("batch", "global_size") && !written_.micro_size_or_tokens) {
      // Neither given: one microbatch per update, i.e. no gradient accumulation.
      sec("batch").set("micro_size", i("batch", "global_size"), kDefaultLocation, false);
    }
    if (has("batch", "packing") && sec("batch").get_bool("packing") && !tokens) {
      report("batch", "packing", "batch", "micro_tokens",
             describe("batch", "packing") +
                 " needs batch.micro_tokens: packed rows are cut into microbatches by "
                 "their token count");
    }
    if (tokens && has("data", "max_length") && i("batch", "micro_tokens") < i("data", "max_length")) {
      report("batch", "micro_tokens", "data", "max_length",
             describe("batch", "micro_tokens") + " is smaller than " + describe("data", "max_length") +
                 "; a microbatch must hold at least one full-length sequence");
    }
  }

  void check_optim() {
    if (!has("optim", "name")) return;
    if (str("optim", "name") == "adamw") {
      reject_unused("optim", "momentum", "optim", "name", "optim.name = \"sgd\"");
    } else if (str("optim", "name") == "sgd") {
      for (const char* k : {"beta1", "beta2", "eps"})
        reject_unused("optim", k, "optim", "name", "optim.name = \"adamw\"");
    }
  }

  void check_schedule_and_train() {
    if (has("schedule", "name") && str("schedule", "name") == "constant")
      reject_unused("schedule", "min_lr_ratio", "schedule", "name", "schedule.name = \"linear\" or \"cosine\"");
    if (!has("train", "max_steps")) return;
    const int64_t max_steps = i("train", "max_steps");
    if (has("schedule", "warmup_steps") && i("schedule", "warmup_steps") > max_steps) {
      report("schedule", "warmup_steps", "train", "max_steps",
             describe("schedule", "warmup_steps") + " exceeds " + describe("train", "max_steps") +
                 "; the learning rate would never reach optim.lr");
    }
    // log_every > max_steps is fine: the last step is always logged.
  }

  void check_checkpoint() {
    if (has("checkpoint", "max_shard_size") && !parse_byte_size(str("checkpoint", "max_shard_size"))) {
      problems_.add(location("checkpoint", "max_shard_size"),
                    "key 'checkpoint.max_shard_size' = \"" + str("checkpoint", "max_shard_size") +
                        "\": expected a positive integer and a unit, like \"5GB\", \"500MB\" or \"2GiB\" (units: B, "
                        "KB, MB, GB, TB, KiB, MiB, GiB, TiB)");
    }
  }

  // Evaluation keys need a held-out set; best/ and early stopping need an
  // evaluation metric to judge by. Whether the plugin emits that metric is
  // checked once its module is set up (core/train/best_model.h).
  // Sharding "full" shards what takes gradients; with LoRA that is only the
  // adapters, and the frozen base would stay whole on every rank. How
  // rollouts gather the layers only matters when the layers are sharded.
  void check_distributed() {
    if (has("distributed", "sharding") && str("distributed", "sharding") != "full" &&
        has("distributed", "generation_gather")) {
      reject_unused("distributed", "generation_gather", "distributed", "sharding", "sharding = \"full\"");
    }
    const bool lora = has("lora", "rank") && i("lora", "rank") > 0;
    if (lora && has("distributed", "sharding") && str("distributed", "sharding") == "full") {
      problems_.add(location("distributed", "sharding"),
                    describe("distributed", "sharding") +
                        " shards the trained parameters, but with LoRA (lora.rank > 0) only the small adapters are "
                        "trained and the frozen base would stay whole on every rank; use sharding = \"optimizer\" "
                        "or \"none\" with LoRA");
    }
  }

  void check_eval() {
    const auto nonempty = [this](const std::string& s, const std::string& k) {
      return has(s, k) && !str(s, k).empty();
    };
    const bool evaluates = nonempty("eval", "data");
    const auto needs_data = [this](const char* k) {
      problems_.add(location("eval", k), "key 'eval." + std::string(k) +
                                             "' needs eval.data (a held-out JSONL file) to evaluate on; set "
                                             "eval.data or remove it");
    };
    // every_steps at its default is allowed: a resolved config lists every key.
    if (!evaluates && user("eval", "every_steps") && has("eval", "every_steps") && i("eval", "every_steps") != 0)
      needs_data("every_steps");
    if (!evaluates && user("eval", "max_examples")) needs_data("max_examples");
    if (!evaluates && has("eval", "rewards") && !sec("eval").get_string_list("rewards").empty())
      needs_data("rewards");
    // The generation settings act only with rewards to score the completions with.
    const bool generates = has("eval", "rewards") && !sec("eval").get_string_list("rewards").empty();
    for (const char* key : {"max_new_tokens", "temperature", "num_generations", "answer_field"}) {
      if (!generates) reject_unused("eval", key, "eval", "rewards", "evaluation by generation (eval.rewards)");
    }
    if (nonempty("checkpoint", "best_metric")) {
      const std::string& metric = str("checkpoint", "best_metric");
      if (metric.rfind("eval/", 0) != 0) {
        problems_.add(location("checkpoint", "best_metric"),
                      describe("checkpoint", "best_metric") +
                          " is not an evaluation metric; expected \"eval/<metric>\", e.g. \"eval/loss\"");
      } else if (!evaluates) {
        problems_.add(
            location("checkpoint", "best_metric"),
            describe("checkpoint", "best_metric") + " needs eval.data (a held-out JSONL file) to evaluate on");
      }
    }
    if (has("train", "early_stopping_patience") && i("train", "early_stopping_patience") > 0 &&
        !nonempty("checkpoint", "best_metric")) {
      problems_.add(location("train", "early_stopping_patience"),
                    describe("train", "early_stopping_patience") +
                        " needs checkpoint.best_metric (e.g. \"eval/loss\") to tell an improvement");
    }
  }

  // LoRA keys act only with a rank; the targets must name each projection
  // once; an adapter to continue from must exist (its contents are checked
  // when it is loaded, against the model).
  void check_lora() {
    const bool lora = has("lora", "rank") && i("lora", "rank") > 0;
    if (!lora) {
      for (const char* k : {"alpha", "use_rslora", "dropout", "target_modules", "init", "save_merged"}) {
        if (has("lora", k)) reject_unused("lora", k, "lora", "rank", "LoRA (lora.rank > 0)");
      }
      return;
    }
    if (has("lora", "target_modules")) {
      const std::vector<std::string>& modules = sec("lora").get_string_list("target_modules");
      if (modules.empty()) {
        problems_.add(location("lora", "target_modules"),
                      "key 'lora.target_modules' is empty; name at least one projection, e.g. [\"q_proj\", "
                      "\"v_proj\"]");
      }
      for (size_t n = 0; n < modules.size(); ++n) {
        if (std::count(modules.begin(), modules.end(), modules[n]) > 1) {
          problems_.add(location("lora", "target_modules"),
                        "key 'lora.target_modules' lists '" + modules[n] + "' more than once");
          break;
        }
      }
    }
    if (has("lora", "init") && !str("lora", "init").empty()) {
      std::error_code error;
      if (!std::filesystem::is_directory(str("lora", "init"), error)) {
        problems_.add(location("lora", "init"), describe("lora", "init") +
                                                    ": no such directory (expected a PEFT adapter directory with "
                                                    "adapter_config.json and adapter_model.safetensors)");
      }
    }
  }

 private:
  std::map<std::string, ConfigValues>& v_;
  ProblemList& problems_;
  std::string file_;
  WrittenKeys written_;
};

}  // namespace

void check_key_combinations(std::map<std::string, ConfigValues>& sections, ProblemList& problems,
                            const std::string& file, WrittenKeys written) {
  CrossChecks(sections, problems, file, written).run();
}

}  // namespace ptrain::config
