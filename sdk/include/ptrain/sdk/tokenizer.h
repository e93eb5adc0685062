// The tokenizer a plugin encodes text with. The core implements it (the
// built-in byte tokenizer, later Hugging Face tokenizer.json).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ptrain::sdk {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Text to ids, without bos/eos.
  virtual std::vector<int64_t> encode(std::string_view text) const = 0;
  // Ids to text; special ids are skipped.
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  virtual int64_t bos_id() const = 0;
  virtual int64_t eos_id() const = 0;
  virtual int64_t pad_id() const = 0;
  virtual int64_t vocab_size() const = 0;  // smallest vocab a model must have
};

}  // namespace ptrain::sdk
