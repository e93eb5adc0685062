// The SDK's prepare_dataset() helpers (ptrain/sdk/util/tokenized_dataset.h)
// and the token cache's log line.
#include "catch.h"
#include "support/test_util.h"

#include "ptrain/sdk/util/tokenized_dataset.h"

#include <string>
#include <vector>

using namespace ptrain;
using ptrain::testing::error_of;

namespace {

std::vector<sdk::Example> examples_with_indices(const std::vector<int64_t>& indices) {
  std::vector<sdk::Example> examples;
  for (const int64_t index : indices) examples.push_back({index, "data.jsonl:" + std::to_string(index + 1), {}});
  return examples;
}

}  // namespace

TEST_CASE("TokenizedDataset keeps each example's tokens under its index", "[unit][sdk]") {
  const std::vector<sdk::Example> examples = examples_with_indices({2, 0, 1});
  sdk::TokenizedDataset<std::string> dataset;
  dataset.assign(examples, {"third", "first", "second"});

  CHECK(dataset.by_index() == std::vector<std::string>{"first", "second", "third"});
  for (size_t i = 0; i < examples.size(); ++i) {
    const std::string* found = dataset.find(examples[i]);
    REQUIRE(found != nullptr);
    CHECK(*found == (std::vector<std::string>{"third", "first", "second"}[i]));
  }
  // A held-out example (index -1) and one past the dataset were never assigned.
  CHECK(dataset.find(examples_with_indices({-1}).front()) == nullptr);
  CHECK(dataset.find(examples_with_indices({3}).front()) == nullptr);
}

TEST_CASE("TokenizedDataset refuses tokens that do not match the examples", "[unit][sdk]") {
  sdk::TokenizedDataset<std::string> dataset;
  CHECK_THAT(error_of([&] {
               dataset.assign(examples_with_indices({0, 1}), {"only one"});
             }),
             Catch::Contains("1 tokenized examples for 2 examples"));
}

TEST_CASE("describe_tokenizing says whether the tokens were computed or loaded, and where they are", "[unit][sdk]") {
  sdk::TokenizeStats stats;
  stats.examples = 4000;
  stats.json_bytes = 150000;
  stats.seconds = 0.02;
  stats.cache_file = "runs/sft/token_cache/1abd79e5b8637e31.bin";
  CHECK(sdk::describe_tokenizing(stats, "examples") ==
        "tokenized 4000 examples (0.02 s, 7.5 MB/s), cached in runs/sft/token_cache/1abd79e5b8637e31.bin");
  stats.from_cache = true;
  CHECK(sdk::describe_tokenizing(stats, "pairs") ==
        "loaded 4000 pairs (0.02 s, 7.5 MB/s) from runs/sft/token_cache/1abd79e5b8637e31.bin");
  // No output directory: no cache file; no measurable time: no rate.
  stats = {};
  stats.examples = 3;
  CHECK(sdk::describe_tokenizing(stats, "examples") == "tokenized 3 examples (0.00 s, 0.0 MB/s)");
}
