// The SDK's Progress as the host shows it (log::PhaseProgress).
#include "core/log/progress.h"
#include "core/plugin/host_context.h"

namespace ptrain::plugin {
namespace {

class HostProgress final : public sdk::Progress {
 public:
  HostProgress(std::string_view label, int64_t total) : phase_("progress", std::string(label), total) {}
  void advance(int64_t count) override { phase_.advance(count); }
  void finish() override { phase_.finish(); }

 private:
  log::PhaseProgress phase_;
};

}  // namespace

std::unique_ptr<sdk::Progress> HostContext::start_progress(std::string_view label, int64_t total) {
  return std::make_unique<HostProgress>(label, total);
}

}  // namespace ptrain::plugin
