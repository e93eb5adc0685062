// Whole-file reads, for the components that read a small file at once
// (config, checkpoint manifests, tokenizer and model JSON, a run's config.toml).
#pragma once

#include "ptrain/sdk/errors.h"

#include <filesystem>
#include <optional>
#include <string>
#include <utility>

namespace ptrain::io {

// The file's bytes, or nullopt when it cannot be opened.
std::optional<std::string> try_read_file(const std::filesystem::path& path);

// The file's bytes; throws ErrorType("<path>: cannot read") when it cannot be
// opened, the error type the caller's kind of input calls for (sdk::ConfigError
// for a file the user named, sdk::Error for one ptrain wrote).
template <typename ErrorType = sdk::Error>
std::string read_file(const std::filesystem::path& path) {
  std::optional<std::string> text = try_read_file(path);
  if (!text) throw ErrorType(path.string() + ": cannot read");
  return std::move(*text);
}

}  // namespace ptrain::io
