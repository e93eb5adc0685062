#include "ptrain/sdk/tokenizer.h"

namespace ptrain::sdk {

std::vector<int64_t> Tokenizer::encode_pieces(const std::vector<std::string_view>& pieces,
                                              std::vector<PieceRange>& pieces_of_id) const {
  std::vector<int64_t> ids;
  pieces_of_id.clear();
  for (size_t piece = 0; piece < pieces.size(); ++piece) {
    const std::vector<int64_t> piece_ids = encode(pieces[piece]);
    ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
    pieces_of_id.insert(pieces_of_id.end(), piece_ids.size(), PieceRange{piece, piece});
  }
  return ids;
}

}  // namespace ptrain::sdk
