// What every library ptrain opens goes through, algorithm plugins
// (plugin_loader), reward libraries (reward_library) and environment
// libraries (environment_library) alike: the file must
// exist and be writable only by its owner, a name is looked up in the search
// directories without following a symlink out of them, and the entry's ABI and
// LibTorch versions must equal the host's before anything else of it is read.
// `kind` ("plugin", "reward library", ...) words the errors.
#pragma once

#include <boost/dll/shared_library.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ptrain::plugin::detail {

// True when `name_or_path` names a file: it contains '/' or ends in ".so".
bool is_library_path(const std::string& name_or_path);

// The resolved file of `path`, after checking it exists and neither it nor its
// directory is world-writable. Throws sdk::PluginError naming `path`.
std::filesystem::path trusted_library_file(const std::filesystem::path& path, std::string_view kind);

// Opens `resolved` with local symbols. Throws sdk::PluginError naming `given`.
std::shared_ptr<boost::dll::shared_library> open_library(const std::filesystem::path& given,
                                                         const std::filesystem::path& resolved);

// Throws sdk::PluginError naming `given` and both versions when the entry's
// ABI or LibTorch version differs from the host's.
void check_entry_versions(const std::filesystem::path& given, std::string_view kind, uint32_t abi_version,
                          const char* torch_version);

// The first search directory holding `file_name`; a symlink there must
// resolve inside that directory (sdk::PluginError). Throws sdk::ConfigError
// listing the directories when none has it.
std::filesystem::path find_library_file(const std::string& name, const std::string& file_name,
                                        const std::vector<std::filesystem::path>& search_dirs, std::string_view kind,
                                        std::string_view hint);

// The SHA-256 of a file, in hex.
std::string sha256_of_file(const std::filesystem::path& path);

// Re-throws the exception being handled (call it inside a catch block) as the
// host's own of the same kind: sdk::DataError and sdk::ConfigError keep their
// message, anything else becomes sdk::PluginError prefixed with `context`. An
// exception a library threw may be caught after the library is gone
// (Boost.DLL's documented hazard), so none leaves the wrapper that called it.
[[noreturn]] void rethrow_as_host_error(const std::string& context);

}  // namespace ptrain::plugin::detail
