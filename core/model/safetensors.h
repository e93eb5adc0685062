// Reading and writing the safetensors format
// (https://github.com/huggingface/safetensors#format):
//   8 bytes   N, little-endian uint64: header length
//   N bytes   JSON object {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}
//   rest      tensor bytes, offsets relative to the end of the header
#pragma once

#include <ATen/core/Tensor.h>

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::model {

// Reads every tensor of a safetensors file into CPU tensors of the stored
// dtype (F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL), in file order
// (by data offset; equal offsets keep header order). Validates the file like
// the reference reader: sane header length within the file, a JSON object
// header, known dtypes, offsets contiguous from 0 and covering the data
// exactly, and shape × dtype size equal to each tensor's byte range. Throws
// sdk::ModelError naming the file and the tensor.
std::vector<std::pair<std::string, at::Tensor>> read_safetensors(const std::filesystem::path& path);

// Writes tensors (any device, any layout; stored contiguous, in the given
// order) with "__metadata__" = metadata plus "format": "pt". The header is
// padded with spaces so tensor data starts at a multiple of 8 bytes. Names
// must be unique. Overwrites `path`; atomicity is the caller's concern.
void write_safetensors(const std::filesystem::path& path,
                       const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

struct TensorHeader {
  std::string name;
  at::ScalarType dtype;
  std::vector<int64_t> shape;
};

// A file written as write_safetensors writes it, one tensor at a time: the
// header (from names, dtypes and shapes alone) on construction, then each
// tensor's bytes as append() gets it, so the tensors never need to be in
// memory together. Throws sdk::ModelError naming the file and the tensor
// (bad names, a tensor that differs from its header entry, I/O errors).
class SafetensorsWriter {
 public:
  SafetensorsWriter(std::filesystem::path path, const std::vector<TensorHeader>& entries,
                    const std::map<std::string, std::string>& metadata = {});
  // The next entry's tensor (any device and layout).
  void append(const at::Tensor& tensor);
  // Every entry was appended; flushes and closes the file.
  void finish();

 private:
  void check_stream();

  std::filesystem::path path_;
  std::vector<TensorHeader> entries_;
  std::ofstream out_;
  size_t written_ = 0;
};

}  // namespace ptrain::model
