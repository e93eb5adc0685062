#include "core/report/run_data.h"

#include "core/io/read_file.h"

#include "ptrain/sdk/errors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <set>

namespace ptrain::report {
namespace fs = std::filesystem;

namespace {

// The step's values, or nullopt for a line that is not a metrics object.
std::optional<std::pair<int64_t, nlohmann::json>> parse_line(const std::string& line) {
  nlohmann::json object = nlohmann::json::parse(line, nullptr, false);
  if (!object.is_object() || !object.contains("step") || !object["step"].is_number_integer()) return std::nullopt;
  const auto step = object["step"].get<int64_t>();
  return std::make_pair(step, std::move(object));
}

// The lines of a per-step JSONL file with their step; a malformed last line is dropped.
std::vector<std::pair<int64_t, nlohmann::json>> read_step_lines(std::istream& in, const fs::path& path) {
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  std::vector<std::pair<int64_t, nlohmann::json>> parsed_lines;
  for (size_t number = 1; number <= lines.size(); ++number) {
    const std::string& line = lines[number - 1];
    if (line.empty()) continue;
    auto parsed = parse_line(line);
    if (!parsed) {
      if (number == lines.size()) break;  // cut short by a crash while it was written
      throw sdk::DataError(path.string() + ":" + std::to_string(number) +
                           ": not a JSON object with an integer \"step\"");
    }
    parsed_lines.push_back(std::move(*parsed));
  }
  return parsed_lines;
}

}  // namespace

RunData read_run(const fs::path& dir) {
  const fs::path metrics_path = dir / "metrics.jsonl";
  std::ifstream in(metrics_path);
  if (!in) throw sdk::Error(metrics_path.string() + ": cannot read (is " + dir.string() + " a ptrain run directory?)");
  RunData run;
  run.dir = dir;
  run.name = fs::absolute(dir).lexically_normal().filename().string();
  if (run.name.empty()) run.name = fs::absolute(dir).lexically_normal().parent_path().filename().string();
  if (fs::exists(dir / "config.toml")) run.config_toml = io::try_read_file(dir / "config.toml").value_or("");

  for (const auto& [step, values] : read_step_lines(in, metrics_path)) {
    const size_t index = run.steps.size();
    run.steps.push_back(step);
    for (const auto& [name, value] : values.items()) {
      if (name == "step") continue;
      auto& series = run.metrics[name];
      series.resize(index + 1);
      if (value.is_number()) series[index] = value.get<double>();
    }
  }
  for (auto& [name, series] : run.metrics) series.resize(run.steps.size());
  const fs::path samples_path = dir / "eval_samples.jsonl";
  if (std::ifstream samples{samples_path}) {
    for (auto& [step, line] : read_step_lines(samples, samples_path)) run.eval_samples.push_back(std::move(line));
  }
  return run;
}

std::map<std::string, double> constant_metrics(const std::vector<RunData>& runs) {
  struct Seen {
    double first = 0.0;
    int64_t count = 0;
    bool differs = false;
  };
  std::map<std::string, Seen> seen;
  for (const RunData& run : runs) {
    for (const auto& [name, series] : run.metrics) {
      Seen& metric = seen[name];
      for (const std::optional<double>& value : series) {
        if (!value) continue;
        if (metric.count == 0) metric.first = *value;
        metric.differs = metric.differs || *value != metric.first;
        ++metric.count;
      }
    }
  }
  std::map<std::string, double> constants;
  for (const auto& [name, metric] : seen) {
    if (!metric.differs && metric.count >= 2) constants.emplace(name, metric.first);
  }
  return constants;
}

std::vector<std::pair<std::string, std::vector<std::string>>> metric_families(const std::vector<RunData>& runs) {
  const std::map<std::string, double> constants = constant_metrics(runs);
  // A family's metrics by name, each evaluation right after its training counterpart.
  const auto training_first = [](const std::string& a, const std::string& b) {
    const auto key = [](const std::string& name) {
      const bool evaluation = name.rfind("eval/", 0) == 0;
      return std::make_pair(evaluation ? name.substr(5) : name, evaluation);
    };
    return key(a) < key(b);
  };
  std::map<std::string, std::set<std::string, decltype(training_first)>> members;
  for (const RunData& run : runs) {
    for (const auto& [name, series] : run.metrics) {
      if (constants.count(name) != 0) continue;
      const std::string trained = name.rfind("eval/", 0) == 0 ? name.substr(5) : name;
      members.try_emplace(trained.substr(0, trained.find('/')), training_first).first->second.insert(name);
    }
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> families;
  for (const char* headline : {"loss", "lr", "tokens_per_s", "grad_norm"}) {
    const auto found = members.find(headline);
    if (found == members.end()) continue;
    families.emplace_back(found->first, std::vector<std::string>(found->second.begin(), found->second.end()));
    members.erase(found);
  }
  for (const auto& [family, names] : members) {
    families.emplace_back(family, std::vector<std::string>(names.begin(), names.end()));
  }
  return families;
}

}  // namespace ptrain::report
