#include "core/tokenizer/bpe_merge_list.h"

namespace ptrain::tokenizer::detail {

std::pair<std::string, std::string> parse_merge(const nlohmann::json& merge, size_t rank, const JsonSource& file) {
  const auto fail = [&](const std::string& what) {
    file.fail("key 'model.merges[" + std::to_string(rank) + "]': " + what);
  };
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string())
    return {merge[0].get<std::string>(), merge[1].get<std::string>()};
  if (!merge.is_string()) fail("expected \"a b\" or [\"a\", \"b\"], got " + merge.dump());
  const std::string text = merge.get<std::string>();
  const size_t space = text.find(' ');
  if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos)
    fail("\"" + text + "\" is not two tokens separated by one space");
  return {text.substr(0, space), text.substr(space + 1)};
}

}  // namespace ptrain::tokenizer::detail
