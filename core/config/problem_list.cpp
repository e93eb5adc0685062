#include "core/config/problem_list.h"

#include "ptrain/sdk/errors.h"

#include <algorithm>
#include <cstdlib>

namespace ptrain::config {

void ProblemList::add(const std::string& location, const std::string& message) {
  Problem problem;
  problem.text = location.empty() ? message : location + ": " + message;
  const std::string prefix = file_ + ":";
  if (location.rfind("--set ", 0) == 0) {
    problem.rank = 1;
  } else if (location.size() > prefix.size() && location.compare(0, prefix.size(), prefix) == 0) {
    problem.rank = 0;
    problem.line = std::strtoll(location.c_str() + prefix.size(), nullptr, 10);
  } else {
    problem.rank = 2;
  }
  problems_.push_back(std::move(problem));
}

void ProblemList::throw_if_any() const {
  if (problems_.empty()) return;
  // toml++ tables iterate by key, not by line: sort into file order.
  std::vector<Problem> sorted = problems_;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Problem& a, const Problem& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.line < b.line;
  });
  if (sorted.size() == 1) throw sdk::ConfigError(sorted.front().text);
  std::string text = file_ + ": " + std::to_string(sorted.size()) + " config errors:";
  for (const Problem& problem : sorted) text += "\n  " + problem.text;
  throw sdk::ConfigError(text);
}

}  // namespace ptrain::config
