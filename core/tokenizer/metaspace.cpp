#include "core/tokenizer/metaspace.h"

namespace ptrain::tokenizer::detail {

std::string Metaspace::rewrite(std::string_view segment, bool at_input_start, std::vector<size_t>& origin) const {
  std::string out;
  origin.clear();
  out.reserve(segment.size() + replacement.size());
  const bool starts_with_replacement =
      segment.substr(0, replacement.size()) == replacement || (!segment.empty() && segment.front() == ' ');
  const bool prepend_here = prepend == Prepend::kAlways || (prepend == Prepend::kFirst && at_input_start);
  if (prepend_here && !starts_with_replacement) {
    out += replacement;
    origin.insert(origin.end(), replacement.size(), 0);
  }
  for (size_t i = 0; i < segment.size(); ++i) {
    if (segment[i] == ' ') {
      out += replacement;
      origin.insert(origin.end(), replacement.size(), i);
    } else {
      out.push_back(segment[i]);
      origin.push_back(i);
    }
  }
  return out;
}

}  // namespace ptrain::tokenizer::detail
