// Loads a Hugging Face model directory the way `ptrain train` does and writes
// the float32 logits of given token ids, for comparison with another program
// (tests/clients/oracles compare them with transformers and PEFT).
//
//   build/bin/ptrain_dump_logits MODEL_DIR IDS OUT.safetensors [cpu|cuda]
//
// IDS: rows of equal length separated by ';', ids by ',' ("1,2,3;4,5,6").
// OUT holds "logits" [rows, length, vocab] float32 and "input_ids" int64.
#include "core/model/causal_lm.h"
#include "core/model/safetensors.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cstdio>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

namespace {

at::Tensor parse_ids(const std::string& text) {
  std::vector<std::vector<int64_t>> rows;
  std::istringstream row_stream(text);
  for (std::string row; std::getline(row_stream, row, ';');) {
    std::vector<int64_t>& ids = rows.emplace_back();
    std::istringstream id_stream(row);
    for (std::string id; std::getline(id_stream, id, ',');) ids.push_back(std::stoll(id));
    if (ids.empty() || ids.size() != rows.front().size())
      throw std::runtime_error("IDS rows must be non-empty and equal");
  }
  if (rows.empty()) throw std::runtime_error("IDS is empty");
  at::Tensor ids = at::empty({static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows.front().size())}, at::kLong);
  for (size_t r = 0; r < rows.size(); ++r) {
    for (size_t t = 0; t < rows[r].size(); ++t) ids[r][t] = rows[r][t];
  }
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc > 5) {
    std::fprintf(stderr, "usage: %s MODEL_DIR IDS OUT.safetensors [cpu|cuda]\n", argv[0]);
    return 2;
  }
  try {
    const at::Device device(argc == 5 ? argv[4] : "cpu");
    const auto model = ptrain::model::CausalLm::load_hf_dir(argv[1], device);
    const at::Tensor ids = parse_ids(argv[2]);
    at::NoGradGuard no_grad;
    const at::Tensor logits = model->logits(ids.to(device)).to(at::kCPU, at::kFloat);
    ptrain::model::write_safetensors(argv[3], {{"logits", logits}, {"input_ids", ids}});
    std::printf("%s: logits [%ld, %ld, %ld]\n", argv[3], static_cast<long>(logits.size(0)),
                static_cast<long>(logits.size(1)), static_cast<long>(logits.size(2)));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ptrain_dump_logits: %s\n", error.what());
    return 1;
  }
  return 0;
}
