#include "core/data/jsonl_reader.h"

#include "ptrain/sdk/errors.h"

#include <fstream>

namespace ptrain::data {

std::vector<sdk::Example> read_jsonl(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw sdk::DataError(path.string() + ": cannot open dataset file");

  std::vector<sdk::Example> examples;
  std::string line;
  int64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string location = path.string() + ":" + std::to_string(line_number);
    nlohmann::json fields;
    try {
      fields = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& error) {
      throw sdk::DataError(location + ": invalid JSON: " + error.what());
    }
    if (!fields.is_object()) {
      throw sdk::DataError(location + ": expected a JSON object, got " + std::string(fields.type_name()));
    }
    examples.push_back({static_cast<int64_t>(examples.size()), location, std::move(fields)});
  }
  if (examples.empty()) throw sdk::DataError(path.string() + ": dataset has no examples");
  return examples;
}

}  // namespace ptrain::data
