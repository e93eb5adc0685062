// The command-line pieces the `ptrain` commands share (boost::program_options):
// the --help option, the config options, and parsing a command's arguments.
#pragma once

#include "core/app/commands.h"

#include <boost/program_options.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace ptrain::app {

// Adds -h/--help to a command's options (last, under their heading).
void add_help_option(boost::program_options::options_description& options);

// -c/--config (required), --set and --plugin-dir, under the title "config options".
boost::program_options::options_description config_options();

std::vector<std::filesystem::path> plugin_dirs_from(const boost::program_options::variables_map& values);
ConfigOptions config_options_from(const boost::program_options::variables_map& values);

// Parses the arguments after the command name into `values`, with --help
// added to `options`. With --help it prints "usage: ptrain COMMAND USAGE" and
// the options and returns false. A missing required option becomes an
// sdk::UsageError that points at `ptrain COMMAND --help`.
bool parse_command(const std::string& command, const std::string& usage,
                   boost::program_options::options_description& options,
                   const std::vector<std::string>& arguments, boost::program_options::variables_map& values);

}  // namespace ptrain::app
