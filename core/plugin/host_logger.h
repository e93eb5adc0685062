// The SDK logger handed to plugins: the process's logger (core/log/logger.h),
// so a plugin's lines have the same shape, rank and files as the core's.
#pragma once

#include "core/log/logger.h"
#include "ptrain/sdk/context.h"

#include <string_view>

namespace ptrain::plugin {

class HostLogger final : public sdk::Logger {
 public:
  void info(std::string_view component, std::string_view message) override { log::info(component, message); }
  void warn(std::string_view component, std::string_view message) override { log::warn(component, message); }
  void error(std::string_view component, std::string_view message) override { log::error(component, message); }
};

}  // namespace ptrain::plugin
