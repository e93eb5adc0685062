// What `ptrain generate` and `ptrain eval` set up before sampling: the rank
// (under `ptrain launch`, torchrun or Slurm as for training), its device and
// communicator, and the model with its tokenizer.
#pragma once

#include "core/app/generation_options.h"
#include "core/dist/communicator.h"
#include "core/generation/model_source.h"

#include <c10/core/Device.h>

#include <memory>

namespace ptrain::app {

struct GenerationSession {
  at::Device device = at::kCPU;
  std::unique_ptr<dist::Communicator> communicator;
  generation::ModelSource source;
  generation::LoadedModel loaded;
  bool rank_zero() const { return communicator->rank() == 0; }
};

// May restart the process to pin the CPU kernels (--cpu-kernels avx2), so it
// runs before anything is read from standard input. Throws sdk::UsageError
// for a model path that is none of the directories --model takes.
GenerationSession open_generation_session(const ModelOptions& options);

}  // namespace ptrain::app
