// `ptrain tokenize`: text on stdin → one JSON array of token ids per line, or
// back with --decode. For looking at what a tokenizer and chat template make
// of data; the tests use it too.
#pragma once

#include <iosfwd>
#include <string>

namespace ptrain::app {

struct TokenizeOptions {
  std::string tokenizer;           // a tokenizer.json path, or "bytes"
  std::string chat_template;       // empty: plain text; else chatml, llama3, plain or auto (the model's own Jinja
                                   // template; plain for bytes); lines are then {"messages": [...]}
  std::string jsonl_field;         // non-empty: lines are JSON objects and this field is the text (or the messages)
  bool decode = false;             // lines are JSON arrays of ids; write the text
  bool generation_prompt = false;  // with a template: end with the assistant prefix
  bool show_mask = false;          // with a template: write {"ids": [...], "trainable": [...]}
  bool render = false;             // with a template: write the rendered conversation as one JSON string
};

// Reads `in` line by line and writes one output line per input line. Throws
// sdk::DataError "stdin:LINE: ..." for a line it cannot read.
int command_tokenize(const TokenizeOptions& options, std::istream& in, std::ostream& out);

}  // namespace ptrain::app
