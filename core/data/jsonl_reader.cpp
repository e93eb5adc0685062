#include "core/data/jsonl_reader.h"

#include "ptrain/sdk/errors.h"

#include <fstream>

namespace ptrain::data {

std::vector<sdk::Example> read_jsonl(const std::filesystem::path& path, std::vector<std::string>* skipped) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw sdk::DataError(path.string() + ": cannot open dataset file");
  return read_jsonl(in, path.string(), skipped);
}

std::vector<sdk::Example> read_jsonl(std::istream& in, const std::string& name, std::vector<std::string>* skipped) {
  std::vector<sdk::Example> examples;
  std::string line;
  int64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string location = name + ":" + std::to_string(line_number);
    std::string problem;
    nlohmann::json fields;
    try {
      fields = nlohmann::json::parse(line);
      if (!fields.is_object()) problem = "expected a JSON object, got " + std::string(fields.type_name());
    } catch (const nlohmann::json::exception& error) {
      // parse_error, and out_of_range for a number too large for a double.
      problem = std::string("invalid JSON: ") + error.what();
    }
    if (problem.empty()) {
      examples.push_back({static_cast<int64_t>(examples.size()), location, std::move(fields)});
    } else if (skipped != nullptr) {
      skipped->push_back(location + ": " + problem);
    } else {
      throw sdk::DataError(location + ": " + problem);
    }
  }
  if (examples.empty()) {
    const size_t bad = skipped ? skipped->size() : 0;
    throw sdk::DataError(name + ": dataset has no examples" +
                         (bad ? " (all " + std::to_string(bad) + " non-blank lines are unreadable; first: " +
                                    skipped->front() + ")"
                              : ""));
  }
  return examples;
}

}  // namespace ptrain::data
