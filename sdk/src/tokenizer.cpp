#include "ptrain/sdk/tokenizer.h"

namespace ptrain::sdk {

std::vector<int64_t> Tokenizer::encode_pieces(const std::vector<std::string_view>& pieces,
                                              std::vector<size_t>& piece_of_id) const {
  std::vector<int64_t> ids;
  piece_of_id.clear();
  for (size_t piece = 0; piece < pieces.size(); ++piece) {
    const std::vector<int64_t> piece_ids = encode(pieces[piece]);
    ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
    piece_of_id.insert(piece_of_id.end(), piece_ids.size(), piece);
  }
  return ids;
}

}  // namespace ptrain::sdk
