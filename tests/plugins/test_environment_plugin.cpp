// An environment library for the tests (libptrain_env_test_echo.so): every
// turn but the last is answered with the observation "ok"; the last ends the
// episode with a reward that depends on the text of all its turns, (total
// characters mod 4) / 3, so a group of random episodes has rewards to
// compare. An episode cut short gets -1.
#include "ptrain/sdk/environment_plugin.h"

#include <memory>
#include <string>

namespace {

class EchoEpisode final : public ptrain::sdk::Episode {
 public:
  ptrain::sdk::EnvironmentReply step(const ptrain::sdk::AssistantTurn& turn) override {
    characters_ += turn.text.size();
    if (!turn.last) return ptrain::sdk::EnvironmentReply::observe("ok");
    return ptrain::sdk::EnvironmentReply::finish(static_cast<double>(characters_ % 4) / 3.0);
  }
  double unfinished_reward() override { return -1.0; }

 private:
  size_t characters_ = 0;
};

class EchoEnvironment final : public ptrain::sdk::Environment {
 public:
  std::string name() const override { return "test_echo"; }
  std::unique_ptr<ptrain::sdk::Episode> start(const ptrain::sdk::Example&) override {
    return std::make_unique<EchoEpisode>();
  }
};

}  // namespace

PTRAIN_DEFINE_ENVIRONMENT_PLUGIN("test_echo", "0.0.1", "test fixture: observes until the last turn", EchoEnvironment)
