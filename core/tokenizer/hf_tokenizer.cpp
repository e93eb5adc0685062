// HfTokenizer: encoding runs the pieces in the order of the `tokenizers`
// library — raw added tokens, normalizer, normalized added tokens,
// pre-tokenizer, model — and decoding looks ids up in the decode table, then
// runs the decoder's steps for SentencePiece-style files.
// Reading the files is in hf_tokenizer_load.cpp.
#include "core/tokenizer/hf_tokenizer.h"

#include "core/tokenizer/hf_tokenizer_impl.h"
#include "core/tokenizer/jinja_chat_template.h"

#include <algorithm>

namespace ptrain::tokenizer {

using detail::AddedMatch;
using detail::Span;

namespace {

// The piece that byte `position` belongs to, given each piece's first byte.
size_t piece_at(const std::vector<size_t>& starts, size_t position) {
  const auto it = std::upper_bound(starts.begin(), starts.end(), position);
  return static_cast<size_t>(it - starts.begin()) - 1;
}

}  // namespace

void HfTokenizer::Impl::encode_text(std::string_view text, const std::vector<size_t>* piece_starts,
                                    std::vector<int64_t>& ids, std::vector<sdk::PieceRange>* pieces_of_id) const {
  NormalizedSection section;
  const auto encode_section = [&](size_t begin, size_t end) {
    if (end <= begin) return;
    normalize_section(text, begin, end, piece_starts, section);
    encode_normalized_section(section, ids, pieces_of_id);
  };
  size_t last = 0;
  for (const AddedMatch& match : added_tokens.find_raw(text)) {
    encode_section(last, match.begin);
    ids.push_back(match.id);
    if (pieces_of_id)
      pieces_of_id->push_back({piece_at(*piece_starts, match.begin), piece_at(*piece_starts, match.end - 1)});
    last = match.end;
  }
  encode_section(last, text.size());
}

// Normalizing piece by piece keeps offsets in the normalized text telling the
// piece; it differs from normalizing the whole only when a piece starts with a
// combining mark.
void HfTokenizer::Impl::normalize_section(std::string_view text, size_t begin, size_t end,
                                          const std::vector<size_t>* piece_starts, NormalizedSection& out) const {
  out.chunk_starts.clear();
  out.chunk_piece.clear();
  out.text.clear();
  out.at_input_start = begin == 0;
  size_t position = begin;
  while (position < end) {
    const size_t piece = piece_starts ? piece_at(*piece_starts, position) : 0;
    size_t chunk_end = end;
    if (piece_starts && piece + 1 < piece_starts->size()) chunk_end = std::min(end, (*piece_starts)[piece + 1]);
    out.chunk_starts.push_back(out.text.size());
    out.chunk_piece.push_back(piece);
    const std::string_view chunk = text.substr(position, chunk_end - position);
    if (normalizer.empty()) {
      out.text.append(chunk);
    } else {
      out.text += normalizer.apply(chunk, position == begin);
    }
    position = chunk_end;
  }
}

void HfTokenizer::Impl::encode_normalized_section(const NormalizedSection& section, std::vector<int64_t>& ids,
                                                  std::vector<sdk::PieceRange>* pieces_of_id) const {
  const std::string_view text = section.text;
  const auto piece_of = [&](size_t position) { return section.chunk_piece[piece_at(section.chunk_starts, position)]; };
  std::vector<Span> spans;
  std::string word, rewritten;
  std::vector<size_t> origin, token_ends;
  const detail::Metaspace* metaspace = pre_tokenizer.metaspace();
  const auto encode_plain = [&](size_t begin, size_t end) {
    if (end <= begin) return;
    // The text the split steps see: the section's, or this segment rewritten by Metaspace.
    std::string_view split_text = text;
    if (metaspace) {
      rewritten = metaspace->rewrite(text.substr(begin, end - begin), section.at_input_start && begin == 0, origin);
      split_text = rewritten;
    }
    const auto position_in_section = [&](size_t position) { return metaspace ? begin + origin[position] : position; };
    spans.assign(1, metaspace ? Span{0, rewritten.size(), false} : Span{begin, end, false});
    pre_tokenizer.split(split_text, spans);
    for (const Span& span : spans) {
      std::string_view bytes = split_text.substr(span.begin, span.end - span.begin);
      if (span.prefix_space) {
        word.assign(1, ' ');
        word.append(bytes);
        bytes = word;
      }
      if (!pieces_of_id) {
        model->encode_word(bytes, ids);
        continue;
      }
      token_ends.clear();
      model->encode_word(bytes, ids, &token_ends);
      // Byte w of the word is byte span.begin + w of split_text, less the
      // prefix space, which counts as the span's first byte.
      const auto piece_of_word_byte = [&](size_t w) {
        const size_t shift = span.prefix_space ? 1 : 0;
        return piece_of(position_in_section(span.begin + (w > shift ? w - shift : 0)));
      };
      size_t token_begin = 0;
      for (const size_t token_end : token_ends) {
        pieces_of_id->push_back({piece_of_word_byte(token_begin), piece_of_word_byte(token_end - 1)});
        token_begin = token_end;
      }
    }
  };
  size_t last = 0;
  for (const AddedMatch& match : added_tokens.find_normalized(text)) {
    encode_plain(last, match.begin);
    ids.push_back(match.id);
    if (pieces_of_id) pieces_of_id->push_back({piece_of(match.begin), piece_of(match.end - 1)});
    last = match.end;
  }
  encode_plain(last, text.size());
}

HfTokenizer::HfTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HfTokenizer::~HfTokenizer() = default;

std::vector<int64_t> HfTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3 + 1);
  impl_->encode_text(text, nullptr, ids, nullptr);
  return ids;
}

std::vector<int64_t> HfTokenizer::encode_pieces(const std::vector<std::string_view>& pieces,
                                                std::vector<sdk::PieceRange>& pieces_of_id) const {
  std::string text;
  std::vector<size_t> starts;
  for (const std::string_view piece : pieces) {
    starts.push_back(text.size());
    text.append(piece);
  }
  std::vector<int64_t> ids;
  pieces_of_id.clear();
  if (pieces.empty()) return ids;
  impl_->encode_text(text, &starts, ids, &pieces_of_id);
  return ids;
}

std::string HfTokenizer::decode(const std::vector<int64_t>& ids) const {
  if (impl_->decoder.byte_level() || (impl_->decoder.empty() && impl_->pre_tokenizer.has_byte_level()))
    return impl_->decode_table.decode(ids);
  return impl_->decoder.decode(impl_->decode_table.tokens(ids));
}

int64_t HfTokenizer::bos_id() const { return impl_->config.bos; }
int64_t HfTokenizer::eos_id() const { return impl_->config.eos; }
int64_t HfTokenizer::pad_id() const { return impl_->config.pad; }
int64_t HfTokenizer::vocab_size() const { return impl_->decode_table.size(); }

std::optional<int64_t> HfTokenizer::token_id(std::string_view token) const { return impl_->added_tokens.id_of(token); }

std::string HfTokenizer::fingerprint() const { return impl_->fingerprint; }

const sdk::ChatTemplate* HfTokenizer::chat_template() const {
  return impl_->chat_template ? &*impl_->chat_template : nullptr;
}

const std::string& HfTokenizer::bos_text() const { return impl_->config.bos_text; }
const std::string& HfTokenizer::eos_text() const { return impl_->config.eos_text; }

std::optional<sdk::ChatTemplate> HfTokenizer::own_chat_template() const {
  if (impl_->config.chat_template.empty()) return std::nullopt;
  return make_jinja_chat_template(
      {impl_->config.chat_template, impl_->config.bos_text, impl_->config.eos_text, impl_->config_path});
}

void HfTokenizer::set_chat_template(std::optional<sdk::ChatTemplate> chat_template) {
  impl_->chat_template = std::move(chat_template);
}

}  // namespace ptrain::tokenizer
