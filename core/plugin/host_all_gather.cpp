// HostContext::all_gather: every rank's rows, however many, concatenated in
// rank order on every rank. The communicator gathers equal chunks of one
// device's contiguous memory, so each rank pads its rows to the longest
// rank's count and the padding is cut out again afterwards.
#include "core/plugin/host_context.h"

#include <ATen/ATen.h>
#include <c10/util/accumulate.h>

#include <algorithm>

namespace ptrain::plugin {
namespace {

// Every rank's row count, after checking that the ranks agree on the rest of
// the shape and on the dtype: one all-reduce of a [R, 3] table.
std::vector<int64_t> rows_per_rank(dist::Communicator& communicator, const at::Tensor& local) {
  const int world_size = communicator.world_size();
  const int64_t row_numel = c10::multiply_integers(local.sizes().slice(1));
  at::Tensor table = at::zeros({world_size, 3}, at::kLong);
  const at::Tensor own = table[communicator.rank()];
  own[0] = local.size(0);
  own[1] = row_numel;
  own[2] = static_cast<int64_t>(local.scalar_type());
  std::vector<at::Tensor> tensors{table};
  communicator.all_reduce_sum(tensors);
  const at::Tensor agreed = tensors[0].cpu().contiguous();
  const int64_t* entries = agreed.data_ptr<int64_t>();
  std::vector<int64_t> rows;
  std::string shapes;
  bool same = true;
  for (int rank = 0; rank < world_size; ++rank) {
    const int64_t* entry = entries + 3 * rank;
    rows.push_back(entry[0]);
    same = same && entry[1] == entries[1] && entry[2] == entries[2];
    shapes += " rank " + std::to_string(rank) + ": " + std::to_string(entry[1]) + " elements per row, " +
              c10::toString(static_cast<at::ScalarType>(entry[2])) + ";";
  }
  if (!same) throw sdk::PluginError("all_gather: the ranks' tensors differ beyond their first dimension:" + shapes);
  return rows;
}

}  // namespace

at::Tensor HostContext::all_gather(const at::Tensor& local) {
  const at::Tensor rows = local.dim() == 0 ? local.reshape({1}) : local;
  const std::vector<int64_t> counts = rows_per_rank(communicator_, rows);
  const int64_t row_numel = c10::multiply_integers(rows.sizes().slice(1));
  int64_t total_rows = 0;
  for (const int64_t count : counts) total_rows += count;
  std::vector<int64_t> shape = rows.sizes().vec();
  shape[0] = total_rows;
  if (total_rows * row_numel == 0) return at::empty(shape, rows.options());

  // Gathered where the communicator works (the rank's device), returned where `local` is.
  const int64_t chunk = *std::max_element(counts.begin(), counts.end()) * row_numel;
  at::Tensor padded = at::zeros({chunk}, rows.options().device(policy_.device()));
  padded.narrow(0, 0, rows.numel()).copy_(rows.reshape({-1}));
  at::Tensor gathered = at::empty({chunk * communicator_.world_size()}, padded.options());
  communicator_.all_gather(padded, gathered);
  std::vector<at::Tensor> parts;
  for (size_t rank = 0; rank < counts.size(); ++rank) {
    parts.push_back(gathered.narrow(0, static_cast<int64_t>(rank) * chunk, counts[rank] * row_numel));
  }
  return at::cat(parts).reshape(shape).to(local.device());
}

}  // namespace ptrain::plugin
