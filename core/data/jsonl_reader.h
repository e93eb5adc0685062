// Reads a JSONL dataset into examples that remember their file:line.
#pragma once

#include "ptrain/sdk/batch.h"

#include <filesystem>
#include <istream>
#include <string>
#include <vector>

namespace ptrain::data {

// One example per non-blank line, each a JSON object. Throws sdk::DataError
// naming file:line for invalid JSON (including invalid UTF-8) or a line that
// is not an object, and naming the file when it is missing or has no example.
// With `skipped` given, a bad line is not thrown but its message appended
// there (data.on_error = "skip"); a file with no usable line still throws.
std::vector<sdk::Example> read_jsonl(const std::filesystem::path& path, std::vector<std::string>* skipped = nullptr);
// The same from a stream (standard input), its locations "<name>:<line>".
std::vector<sdk::Example> read_jsonl(std::istream& in, const std::string& name,
                                     std::vector<std::string>* skipped = nullptr);

}  // namespace ptrain::data
