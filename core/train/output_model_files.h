// What final/ and every checkpoint's model directory hold besides the weights
// (docs/file-formats.md#model-directories), gathered once when the run is built, so that a served model
// renders chat and stops the way it was trained:
//   config.json             + bos_token_id / eos_token_id of the run's tokenizer (null where it has none)
//   generation_config.json  the input model's (model.init), with bos/eos/pad ids added where it lacks them
//   tokenizer.json          a copy of tokenizer.path
//   tokenizer_config.json   the one beside it, its "chat_template" the template the run used: the
//                           input's own for "auto", else the named or custom template as Jinja
//   special_tokens_map.json a copy, when the input had one
// With the byte tokenizer, tokenizer.json and tokenizer_config.json are its
// Hugging Face equivalent (core/tokenizer/byte_tokenizer_files.h) with the
// run's template as Jinja.
#pragma once

#include "core/checkpoint/model_dir.h"
#include "core/config/run_config.h"
#include "ptrain/sdk/tokenizer.h"

namespace ptrain::train {

// Reads the input files now; throws sdk::ConfigError naming a file that
// cannot be read or is not valid JSON.
checkpoint::ModelDirFiles output_model_files(const config::RunConfig& config, const sdk::Tokenizer& tokenizer);

}  // namespace ptrain::train
