// Dataset tokenization throughput, in MB of text per second: one thread (the
// baseline), all intra-op threads through sdk::tokenize_dataset, and a
// restart that reads the token cache. Numbers, not a pass/fail test.
//
//   bench_tokenize [tokenizer.json] [megabytes]
// Defaults: the Qwen3 tokenizer.json the test fixtures extract into the build
// tree, and 8 MB of generated multilingual text, code and numbers.
#include "core/checkpoint/remove_tree.h"
#include "core/tokenizer/hf_tokenizer.h"
#include "ptrain/sdk/util/token_cache.h"

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

using namespace ptrain;
namespace fs = std::filesystem;

namespace {

// Documents of ~2 KB drawn from the fixture corpus's words with random
// numbers and identifiers mixed in, so the per-thread word cache sees
// realistic (not fully repeated) vocabulary.
std::vector<sdk::Example> make_examples(const fs::path& corpus_file, double megabytes) {
  std::ifstream in(corpus_file);
  const nlohmann::json corpus = nlohmann::json::parse(in);
  std::vector<std::string> words;
  for (const auto& text : corpus) {
    std::string line = text.get<std::string>(), word;
    for (const char c : line + " ") {
      if (c == ' ') {
        if (!word.empty()) words.push_back(word);
        word.clear();
      } else {
        word.push_back(c);
      }
    }
  }
  std::mt19937_64 rng(7);
  std::vector<sdk::Example> examples;
  size_t total = 0;
  while (static_cast<double>(total) < megabytes * 1e6) {
    std::string document;
    while (document.size() < 2000) {
      const auto pick = rng() % 10;
      if (pick == 0) {
        document += std::to_string(rng() % 100000);
      } else if (pick == 1) {
        document += "var_" + std::to_string(rng() % 5000);
      } else {
        document += words[rng() % words.size()];
      }
      document += rng() % 12 == 0 ? "\n" : " ";
    }
    total += document.size();
    sdk::Example example;
    example.index = static_cast<int64_t>(examples.size());
    example.location = "bench:" + std::to_string(examples.size() + 1);
    example.fields = {{"text", std::move(document)}};
    examples.push_back(std::move(example));
  }
  return examples;
}

}  // namespace

int main(int argc, char** argv) {
  const fs::path tokenizer_path = argc > 1 ? fs::path(argv[1]) : fs::path(PTRAIN_BENCH_TOKENIZER);
  const double megabytes = argc > 2 ? std::atof(argv[2]) : 8.0;
  // Both measurements include hashing the examples for the cache key (a few percent).
  const std::vector<sdk::Example> examples = make_examples(PTRAIN_BENCH_CORPUS, megabytes);
  double text_bytes = 0;
  for (const auto& example : examples) text_bytes += example.fields.at("text").get_ref<const std::string&>().size();
  const auto rate = [&](double seconds) { return text_bytes / 1e6 / seconds; };
  // A fresh tokenizer per measurement: its per-thread word caches start cold,
  // so no measurement profits from the one before.
  const auto run = [&](int threads, const std::string& cache_dir, sdk::TokenizeStats& stats) {
    const auto tokenizer = tokenizer::HfTokenizer::load(tokenizer_path);
    at::set_num_threads(threads);
    const auto tokenize = [&](const sdk::Example& example) {
      return sdk::TokenArrays{tokenizer->encode(example.fields.at("text").get_ref<const std::string&>())};
    };
    return sdk::tokenize_dataset(*tokenizer, cache_dir, examples, "bench/1", tokenize, &stats);
  };
  std::printf("tokenizer %s, %zu documents, %.1f MB of text\n", tokenizer_path.c_str(), examples.size(),
              text_bytes / 1e6);

  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  sdk::TokenizeStats stats;
  size_t ids = 0;
  for (const auto& arrays : run(1, "", stats)) ids += arrays[0].size();
  const double single = rate(stats.seconds);
  std::printf("baseline, 1 thread:           %8.2f MB/s  (%.2f s, %zu ids)\n", single, stats.seconds, ids);
  run(threads, "", stats);
  const double parallel = rate(stats.seconds);
  std::printf("tokenize_dataset, %d threads:  %8.2f MB/s  (%.2f s)\n", threads, parallel, stats.seconds);

  const fs::path cache = fs::temp_directory_path() / ("ptrain_bench_tokenize_" + std::to_string(::getpid()));
  run(threads, cache.string(), stats);
  run(threads, cache.string(), stats);
  const double cached = rate(stats.seconds);
  std::printf("restart, from the token cache: %8.2f MB/s  (%.2f s)\n", cached, stats.seconds);
  ptrain::checkpoint::remove_tree(cache);
  std::printf("\nMB/s   1 thread | %d threads (speed-up) | cached (speed-up)\n", threads);
  std::printf("     %10.2f | %10.2f (%5.2fx)    | %8.1f (%6.1fx)\n", single, parallel, parallel / single, cached,
              cached / single);
  return 0;
}
