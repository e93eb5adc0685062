// Byte tokenizer, SFT tokenization and truncation, JSONL reading, the global
// batch sampler and microbatch planning.
#include "catch.h"

#include "support/run_command.h"
#include "support/test_util.h"

#include "core/data/global_batch_sampler.h"
#include "core/data/jsonl_reader.h"
#include "core/tokenizer/byte_tokenizer.h"
#include "core/train/global_batches.h"
#include "ptrain/sdk/batch.h"
#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/example_fields.h"
#include "ptrain/sdk/util/microbatching.h"
#include "sft_loss.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <set>

using namespace ptrain;
namespace fs = std::filesystem;

using ptrain::testing::error_of;

namespace {

fs::path write_data_file(const std::string& name, const std::string& text) {
  return testing::write_text_file(testing::fresh_test_dir("data"), name, text);
}

}  // namespace

TEST_CASE("byte tokenizer round-trips non-ASCII UTF-8 byte for byte") {
  const tokenizer::ByteTokenizer tokenizer;
  const std::string text = "naïve café — 日本語 🙂 \t\n";
  const std::vector<int64_t> ids = tokenizer.encode(text);
  CHECK(ids.size() == text.size());  // one id per byte, not per code point
  CHECK(ids[2] == 0xC3);             // 'ï' is C3 AF
  CHECK(ids[3] == 0xAF);
  CHECK(tokenizer.decode(ids) == text);
  CHECK(tokenizer.bos_id() == 256);
  CHECK(tokenizer.eos_id() == 257);
  CHECK(tokenizer.pad_id() == 258);
  // Special ids are skipped when decoding.
  CHECK(tokenizer.decode({256, 'h', 'i', 257, 258}) == "hi");
}

TEST_CASE("SFT sequences are <bos> prompt completion <eos>, trained on completion and <eos> only") {
  const tokenizer::ByteTokenizer tokenizer;
  const sft::TokenizedExample example = sft::tokenize_example(tokenizer, "ab", "cd", 64);
  CHECK(example.tokens == std::vector<int64_t>{256, 'a', 'b', 'c', 'd', 257});
  CHECK(example.completion_start == 3);
  CHECK_FALSE(example.truncated);

  const sdk::TokenBatch batch = sft::collate_examples({example}, tokenizer.pad_id());
  // inputs <bos> a b c d; targets a b c d <eos>; trained targets c d <eos>.
  CHECK(at::equal(batch.input_ids, at::tensor({256, 'a', 'b', 'c', 'd'}, at::kLong).view({1, 5})));
  CHECK(at::equal(batch.target_ids, at::tensor({'a', 'b', 'c', 'd', 257}, at::kLong).view({1, 5})));
  CHECK(at::equal(batch.loss_mask, at::tensor(std::vector<int64_t>{0, 0, 1, 1, 1}).to(at::kBool).view({1, 5})));
}

TEST_CASE("truncation cuts at max_length and is reported") {
  const tokenizer::ByteTokenizer tokenizer;
  const sft::TokenizedExample cut = sft::tokenize_example(tokenizer, "abc", "defgh", 6);
  CHECK(cut.tokens == std::vector<int64_t>{256, 'a', 'b', 'c', 'd', 'e'});
  CHECK(cut.truncated);
  const sft::TokenizedExample prompt_only = sft::tokenize_example(tokenizer, "abcdefgh", "x", 5);
  CHECK(prompt_only.truncated);
  const sdk::TokenBatch batch = sft::collate_examples({cut, prompt_only}, tokenizer.pad_id());
  CHECK(batch.loss_mask[0].sum().item<int64_t>() == 2);  // 'd' and 'e'; <eos> was cut
  CHECK(batch.loss_mask[1].sum().item<int64_t>() == 0);  // nothing of the completion survived
  // Right padding with <pad> in both inputs and targets.
  CHECK(batch.input_ids.size(1) == 5);
}

TEST_CASE("the sampler's global batches depend on (seed, epoch, step) only and cover each epoch once") {
  const data::GlobalBatchSampler sampler(103, 10, 42);
  CHECK(sampler.steps_per_epoch() == 10);
  std::set<int64_t> seen;
  for (int64_t step = 0; step < 10; ++step) {
    for (const int64_t index : sampler.global_batch(step)) CHECK(seen.insert(index).second);
  }
  CHECK(seen.size() == 100);
  CHECK(sampler.position(13).epoch == 1);
  CHECK(sampler.position(13).step_in_epoch == 3);
  CHECK(sampler.global_batch(13) != sampler.global_batch(3));  // a new permutation per epoch
  const data::GlobalBatchSampler same(103, 10, 42);
  CHECK(same.global_batch(13) == sampler.global_batch(13));
  const data::GlobalBatchSampler other_seed(103, 10, 43);
  CHECK(other_seed.global_batch(0) != sampler.global_batch(0));
}

TEST_CASE("rank slices and microbatch plans partition the global batch without reordering it") {
  // Whatever the world size, the slices concatenate to the whole batch in order.
  for (int world = 1; world <= 5; ++world) {
    int64_t next = 0;
    for (int rank = 0; rank < world; ++rank) {
      const data::RankSlice slice = data::rank_slice(11, rank, world);
      CHECK(slice.begin == next);
      CHECK(slice.end - slice.begin >= 11 / world);
      next = slice.end;
    }
    CHECK(next == 11);
  }
  const std::vector<int64_t> lengths{5, 9, 2, 30, 4, 4, 4};
  for (const int64_t micro_size : {1, 2, 3, 7, 10}) {
    const auto groups = sdk::split_into_microbatches(lengths, {micro_size, 0});
    std::vector<int64_t> flat;
    for (const auto& group : groups) {
      CHECK(static_cast<int64_t>(group.size()) <= micro_size);
      flat.insert(flat.end(), group.begin(), group.end());
    }
    CHECK(flat == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6});
  }
  // Token budget 20: {5,9} costs 18; adding 2 keeps 27 > 20 → new group; 30 alone exceeds the budget.
  const auto by_tokens = sdk::split_into_microbatches(lengths, {0, 20});
  CHECK(by_tokens == std::vector<std::vector<int64_t>>{{0, 1}, {2}, {3}, {4, 5, 6}});
}

TEST_CASE("JSONL reading names file and line of a bad example") {
  const fs::path good = write_data_file(
      "good.jsonl", "{\"prompt\": \"a\", \"completion\": \"b\"}\n\n{\"prompt\": \"c\", \"completion\": \"d\"}\n");
  const auto examples = data::read_jsonl(good);
  REQUIRE(examples.size() == 2);
  CHECK(examples[1].location == good.string() + ":3");

  const fs::path broken = write_data_file("broken.jsonl", "{\"prompt\": \"a\"}\n{\"prompt\": \n");
  CHECK_THAT(error_of([&] { data::read_jsonl(broken); }), Catch::Contains(broken.string() + ":2: invalid JSON"));
  const fs::path not_object = write_data_file("array.jsonl", "[1, 2]\n");
  CHECK_THAT(error_of([&] { data::read_jsonl(not_object); }), Catch::Contains(":1: expected a JSON object"));
  const fs::path bad_utf8 = write_data_file("utf8.jsonl", "{\"prompt\": \"\xff\xfe\"}\n");
  CHECK_THAT(error_of([&] { data::read_jsonl(bad_utf8); }), Catch::Contains(bad_utf8.string() + ":1:"));
  const fs::path empty = write_data_file("empty.jsonl", "\n");
  CHECK_THAT(error_of([&] { data::read_jsonl(empty); }), Catch::Contains("has no examples"));
  CHECK_THAT(error_of([&] { data::read_jsonl("/nonexistent/x.jsonl"); }), Catch::Contains("cannot open"));

  sdk::Example example{0, "f.jsonl:7", nlohmann::json{{"prompt", 3}}};
  CHECK(error_of([&] { sdk::require_string(example, "prompt"); }) ==
        "f.jsonl:7: field 'prompt': expected a string, got number");
  CHECK(error_of([&] { sdk::require_string(example, "completion"); }) == "f.jsonl:7: missing field 'completion'");
}

TEST_CASE("bool and number fields are read with errors that name file:line, the field and the value") {
  const sdk::Example example{0, "f.jsonl:9",
                             nlohmann::json{{"label", true}, {"score", 2}, {"ratio", 0.25}, {"as_text", "true"}}};
  CHECK(sdk::require_bool(example, "label"));
  CHECK(sdk::require_number(example, "score") == 2.0);
  CHECK(sdk::require_number(example, "ratio") == 0.25);
  CHECK(error_of([&] { sdk::require_bool(example, "as_text"); }) ==
        "f.jsonl:9: field 'as_text': expected true or false, got string \"true\"");
  CHECK(error_of([&] { sdk::require_bool(example, "score"); }) ==
        "f.jsonl:9: field 'score': expected true or false, got number 2");
  CHECK(error_of([&] { sdk::require_number(example, "label"); }) ==
        "f.jsonl:9: field 'label': expected a number, got boolean true");
  CHECK(error_of([&] { sdk::require_bool(example, "missing"); }) == "f.jsonl:9: missing field 'missing'");
}

TEST_CASE("a global batch tells each rank its share and where the share sits") {
  std::vector<sdk::Example> examples(20);
  for (size_t i = 0; i < examples.size(); ++i) examples[i].index = static_cast<int64_t>(i);
  const data::GlobalBatchSampler sampler(20, 7, 4);
  const std::vector<int64_t> indices = sampler.global_batch(1);
  for (int world = 1; world <= 4; ++world) {
    std::vector<int64_t> counts;
    for (int rank = 0; rank < world; ++rank) {
      const sdk::GlobalBatch batch = train::training_global_batch(examples, indices, rank, world);
      CHECK_FALSE(batch.held_out);
      CHECK(batch.ids == indices);
      // The share is the sampler's rank slice, and its positions point at it.
      std::vector<int64_t> share;
      for (const sdk::Example* example : train::rank_share(batch)) share.push_back(example->index);
      CHECK(share == data::rank_example_indices(sampler, 1, rank, world));
      for (size_t k = 0; k < share.size(); ++k) CHECK(indices[batch.rank_positions[k]] == share[k]);
      if (rank == 0) counts = batch.rank_counts;
      CHECK(batch.rank_counts == counts);
    }
    int64_t total = 0;
    for (const int64_t count : counts) total += count;
    CHECK(total == 7);
  }
  // A held-out chunk [5, 12): example i on rank i mod 3; ids are the positions in the held-out set.
  const sdk::GlobalBatch chunk = train::held_out_global_batch(examples, 5, 12, 1, 3);
  CHECK(chunk.held_out);
  CHECK(chunk.ids == std::vector<int64_t>{5, 6, 7, 8, 9, 10, 11});
  CHECK(chunk.rank_positions == std::vector<int64_t>{2, 5});  // examples 7 and 10
  CHECK(chunk.rank_counts == std::vector<int64_t>{2, 2, 3});  // {6, 9}, {7, 10}, {5, 8, 11}
}
