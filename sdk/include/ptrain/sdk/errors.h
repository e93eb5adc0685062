// Error types shared by the core and plugins.
//
// Every message is complete when thrown: it names the file:line, key, tensor
// or rank it is about, what was expected and what was found. `main` prints
// `what()` as one line and maps the kind to an exit code (bad input — usage,
// config and data errors: 2, everything else: 1).
//
// Each class's destructor is defined in libptrain_sdk (its key function), so
// its vtable and type_info live there, in a library that stays loaded, and
// not in the plugin that throws: an error a plugin (or a reward library)
// throws is still readable when `main` catches it after that plugin has been
// unloaded (Boost.DLL's "exceptions outliving the library" hazard).
#pragma once

#include <stdexcept>
#include <string>

namespace ptrain::sdk {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  ~Error() override;
};

// The command line was malformed (exit code 2).
class UsageError : public Error {
 public:
  using Error::Error;
  ~UsageError() override;
};

// A configuration value is missing, unknown, mistyped or out of range (exit code 2).
class ConfigError : public Error {
 public:
  using Error::Error;
  ~ConfigError() override;
};

// A dataset line is unreadable or lacks a field; the message starts with file:line (exit code 2).
class DataError : public Error {
 public:
  using Error::Error;
  ~DataError() override;
};

// A model directory, config.json or tensor file is unusable; the message names the tensor or key.
class ModelError : public Error {
 public:
  using Error::Error;
  ~ModelError() override;
};

// A plugin library could not be loaded or is incompatible; the message names the path.
class PluginError : public Error {
 public:
  using Error::Error;
  ~PluginError() override;
};

}  // namespace ptrain::sdk
