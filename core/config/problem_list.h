// The errors of one config, collected before anything throws so a user can
// fix them all in one pass, and reported in file order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ptrain::config {

class ProblemList {
 public:
  explicit ProblemList(std::string file) : file_(std::move(file)) {}

  // `location`: "file:line", "--set section.key=value", or the file name
  // alone (a problem of the whole file); "" for none.
  void add(const std::string& location, const std::string& message);
  bool empty() const { return problems_.empty(); }

  // Throws sdk::ConfigError: the one problem, or a summary line and one line
  // per problem (file lines first, in order, then --set, then the file).
  void throw_if_any() const;

 private:
  struct Problem {
    int rank = 0;  // 0: a file line, 1: a --set, 2: the whole file
    int64_t line = 0;
    std::string text;
  };
  std::string file_;
  std::vector<Problem> problems_;
};

}  // namespace ptrain::config
