// A ptrain chat template (sdk::ChatTemplate: chatml, llama3, plain or custom)
// written as the Jinja source Hugging Face tools render chat with
// (tokenizer_config.json's "chat_template"), so a model trained with it is
// served with the same format: transformers' apply_chat_template, vLLM and
// llama.cpp render the same text as ChatTemplate::render (with {bos}/{eos} as
// the tokenizer's bos_token/eos_token texts).
#pragma once

#include "ptrain/sdk/chat.h"

#include <string>

namespace ptrain::tokenizer {

// Every literal is a Jinja string expression and every tag trims the
// whitespace around it, so the source's own layout adds nothing to the
// output. An unknown role raises an exception, as ptrain refuses it. The
// first line is a Jinja comment naming the template it came from.
std::string chat_template_jinja(const sdk::ChatTemplate& chat_template);

}  // namespace ptrain::tokenizer
