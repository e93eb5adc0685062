// One run per run directory, through the `ptrain` executable: while a run
// holds its directory a second train, --overwrite or --resume is refused at
// once naming the holder, and the first run's outputs stay complete; a
// killed holder leaves no stale lock; a multi-rank run holds one lock, rank
// 0's (docs/reliability.md "One run per directory").
#include "catch.h"

#include "integration/small_sft_run.h"
#include "support/run_command.h"
#include "support/test_util.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace fs = std::filesystem;
using ptrain::testing::CommandResult;
using ptrain::testing::run_command;
using ptrain::testing::run_ptrain;

namespace {

const std::string kPtrain = PTRAIN_EXE;

std::string train_args(const fs::path& config, const fs::path& run, const std::string& extra) {
  return "train -c " + config.string() + " --set output_dir=\"" + run.string() + "\"" + extra;
}

// Runs `holder` in the background until `ready` (a file it writes, by
// default its metrics.jsonl after a step) is there (at most 300 s), then
// `during` (shell lines), then sends it `signal` and waits for it. Prints
// holder_pid=, holder_exit= and what `during` prints; the holder's own
// output goes to dir/holder.log.
CommandResult while_holding(const fs::path& dir, const std::string& holder, const fs::path& ready,
                            const std::string& during, const std::string& signal) {
  const fs::path script = dir / "while_holding.sh";
  std::ofstream(script) << kPtrain << " " << holder << " > " << (dir / "holder.log").string() << " 2>&1 &\n"
                        << "pid=$!\necho holder_pid=$pid\n"
                        << "i=0; while [ ! -s " << ready.string()
                        << " ] && [ $i -lt 1500 ]; do sleep 0.2; i=$((i+1)); done\n"
                        << during << "\nkill -" << signal << " $pid; wait $pid; echo holder_exit=$?\n";
  return run_command("sh " + script.string());
}

// name=value lines of a script's output.
std::map<std::string, std::string> printed_values(const std::string& output) {
  std::map<std::string, std::string> values;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    const size_t equals = line.find('=');
    if (equals != std::string::npos && line.find(' ') == std::string::npos) {
      values[line.substr(0, equals)] = line.substr(equals + 1);
    }
  }
  return values;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

// A shell line that runs `ptrain <arguments>` into dir/<name>.txt and prints name=<exit code>.
std::string attempt(const fs::path& dir, const std::string& name, const std::string& arguments) {
  return kPtrain + " " + arguments + " > " + (dir / (name + ".txt")).string() + " 2>&1; echo " + name + "=$?\n";
}

}  // namespace

TEST_CASE("a second run in a held run directory is refused at once, naming the holder, and the first completes",
          "[reliability][run_lock]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("run_lock_second");
  const fs::path config = ptrain::testing::write_small_sft_config(dir, "run", 3e-3);
  const fs::path run = dir / "run";
  const std::string second = train_args(config, run, " --set train.max_steps=2");
  const CommandResult result = while_holding(
      dir, train_args(config, run, " --set train.max_steps=100000 --set train.log_every=1"), run / "metrics.jsonl",
      attempt(dir, "plain", second) + attempt(dir, "overwrite", second + " --overwrite") +
          attempt(dir, "resume", second + " --resume auto") +
          attempt(dir, "validate", "validate -c " + config.string() + " --set output_dir=\"" + run.string() + "\""),
      "TERM");
  INFO(result.output << "\nholder: " << read_text(dir / "holder.log"));
  const auto values = printed_values(result.output);
  REQUIRE(values.count("holder_exit") == 1);
  const std::string holder = "output_dir '" + run.string() + "' is in use by another ptrain run: pid " +
                             values.at("holder_pid") + " on host " + host_name() + ", running since ";
  for (const std::string name : {"plain", "overwrite", "resume"}) {
    const std::string output = read_text(dir / (name + ".txt"));
    INFO(name << ": " << output);
    CHECK(values.at(name) == "2");
    CHECK_THAT(output, Catch::Contains(holder));
    CHECK_THAT(output, !Catch::Contains("[train]"));  // refused before anything loaded
  }
  CHECK(values.at("validate") == "0");
  CHECK_THAT(read_text(dir / "validate.txt"), Catch::Contains(holder));

  // The holder stopped on SIGTERM as usual: every step logged once, its
  // checkpoint complete and resumable.
  CHECK(values.at("holder_exit") == "0");
  const std::string log = read_text(dir / "holder.log");
  const size_t at = log.find("stopped on request after step ");
  REQUIRE(at != std::string::npos);
  const int stopped_at = std::stoi(log.substr(at + 30));
  const auto metrics = ptrain::testing::read_metrics_jsonl(run / "metrics.jsonl");
  REQUIRE(static_cast<int>(metrics.size()) == stopped_at);
  for (int step = 1; step <= stopped_at; ++step) CHECK(metrics[step - 1]["step"] == step);
  CHECK(read_text(run / "checkpoints" / "latest") == "step_" + std::to_string(stopped_at) + "\n");
  const CommandResult resumed =
      run_ptrain(train_args(config, run, " --resume auto --set train.max_steps=" + std::to_string(stopped_at + 1)));
  INFO(resumed.output);
  CHECK(resumed.exit_code == 0);
}

TEST_CASE("a killed holder leaves no stale lock: the next run starts without a manual step",
          "[reliability][run_lock]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("run_lock_killed");
  const fs::path config = ptrain::testing::write_small_sft_config(dir, "run", 3e-3);
  const fs::path run = dir / "run";
  const CommandResult killed =
      while_holding(dir, train_args(config, run, " --set train.max_steps=100000 --set checkpoint.every_steps=1"),
                    run / "checkpoints" / "latest", "", "KILL");
  INFO(killed.output << "\nholder: " << read_text(dir / "holder.log"));
  REQUIRE(printed_values(killed.output).at("holder_exit") == "137");
  REQUIRE(fs::exists(run / "ptrain.lock"));

  const std::string latest = read_text(run / "checkpoints" / "latest");
  REQUIRE(latest.rfind("step_", 0) == 0);
  const int saved = std::stoi(latest.substr(5));
  const CommandResult next = run_ptrain(
      train_args(config, run, " --resume auto --set train.max_steps=" + std::to_string(saved + 1)) + " 2>&1");
  INFO(next.output);
  CHECK(next.exit_code == 0);
  CHECK_THAT(next.output, !Catch::Contains("in use by another"));
  CHECK(fs::exists(run / "final" / "model.safetensors"));
}

TEST_CASE("a multi-rank run holds one lock, rank 0's", "[reliability][run_lock]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("run_lock_ranks");
  const fs::path config = ptrain::testing::write_small_sft_config(dir, "run", 3e-3);
  const fs::path run = dir / "run";
  const fs::path lock = run / "ptrain.lock";
  // The lines of /proc/locks on the lock file's inode, and rank 0's pid.
  const std::string inspect =
      "ino=$(stat -c %i " + lock.string() + ")\n" + "grep \":$ino \" /proc/locks > " + (dir / "locks.txt").string() +
      "\necho locks=$(wc -l < " + (dir / "locks.txt").string() + ")\n" + "locker=$(awk '{print $5}' " +
      (dir / "locks.txt").string() + " | head -n 1)\necho locker=$locker\n" +
      "echo locker_rank=$(tr '\\0' '\\n' < /proc/$locker/environ | grep '^RANK=' | cut -d= -f2)\n" +
      attempt(dir, "second", train_args(config, run, " --set train.max_steps=2 --overwrite"));
  const CommandResult result =
      while_holding(dir, "launch --nproc 2 -- " + train_args(config, run, " --set train.max_steps=100000"),
                    run / "metrics.jsonl", inspect, "TERM");
  INFO(result.output << "\nholder: " << read_text(dir / "holder.log"));
  const auto values = printed_values(result.output);
  CHECK(values.at("locks") == "1");
  CHECK(values.at("locker_rank") == "0");
  CHECK(values.at("locker") != values.at("holder_pid"));  // a worker holds it, not the launcher
  const nlohmann::json written = nlohmann::json::parse(read_text(lock));
  CHECK(std::to_string(written.at("pid").get<int64_t>()) == values.at("locker"));
  CHECK(values.at("second") == "2");
  CHECK_THAT(read_text(dir / "second.txt"),
             Catch::Contains("is in use by another ptrain run: pid " + values.at("locker") + " on host"));
  CHECK(values.at("holder_exit") == "0");
}
