#include "ptrain/sdk/util/token_cache.h"

#include "ptrain/sdk/util/fingerprint.h"

#include "ptrain/sdk/chat.h"
#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/progress.h"

#include <ATen/Parallel.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>

namespace ptrain::sdk {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'P', 'T', 'O', 'K', 'C', 'A', 'C', '1'};

void write_u64(std::ostream& out, uint64_t value) { out.write(reinterpret_cast<const char*>(&value), sizeof value); }

uint64_t read_u64(std::istream& in) {
  uint64_t value = 0;
  in.read(reinterpret_cast<char*>(&value), sizeof value);
  return value;
}

// Layout: magic, key length + key, example count, then per example the number
// of arrays and per array its length and int32 values (native byte order: the
// cache never leaves the machine that wrote it).
void write_cache(const fs::path& path, const std::string& key, const std::vector<TokenArrays>& data) {
  fs::create_directories(path.parent_path());
  const fs::path temp = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(temp.string() + ": cannot write the token cache");
    out.write(kMagic, sizeof kMagic);
    write_u64(out, key.size());
    out.write(key.data(), static_cast<std::streamsize>(key.size()));
    write_u64(out, data.size());
    std::vector<int32_t> buffer;
    for (const TokenArrays& arrays : data) {
      write_u64(out, arrays.size());
      for (const auto& array : arrays) {
        write_u64(out, array.size());
        buffer.assign(array.begin(), array.end());
        out.write(reinterpret_cast<const char*>(buffer.data()), static_cast<std::streamsize>(buffer.size() * 4));
      }
    }
    if (!out) throw Error(temp.string() + ": writing the token cache failed (disk full?)");
  }
  fs::rename(temp, path);
}

// nullopt when the file is absent, from another key, or unreadable (then it is rebuilt).
std::optional<std::vector<TokenArrays>> read_cache(const fs::path& path, const std::string& key, size_t count) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  char magic[sizeof kMagic];
  in.read(magic, sizeof magic);
  if (!in || std::memcmp(magic, kMagic, sizeof kMagic) != 0) return std::nullopt;
  const uint64_t key_size = read_u64(in);
  if (!in || key_size != key.size()) return std::nullopt;
  std::string stored(key_size, '\0');
  in.read(stored.data(), static_cast<std::streamsize>(key_size));
  if (stored != key || read_u64(in) != count) return std::nullopt;
  std::vector<TokenArrays> data(count);
  std::vector<int32_t> buffer;
  for (TokenArrays& arrays : data) {
    const uint64_t num_arrays = read_u64(in);
    if (!in || num_arrays > 64) return std::nullopt;
    arrays.resize(num_arrays);
    for (auto& array : arrays) {
      const uint64_t length = read_u64(in);
      if (!in || length > (uint64_t{1} << 32)) return std::nullopt;
      buffer.resize(length);
      in.read(reinterpret_cast<char*>(buffer.data()), static_cast<std::streamsize>(length * 4));
      array.assign(buffer.begin(), buffer.end());
    }
  }
  if (!in) return std::nullopt;
  return data;
}

// Both tokenize_dataset overloads: `start_progress` shows the tokenizing phase.
std::vector<TokenArrays> tokenize_all(const Tokenizer& tokenizer, const std::string& cache_dir,
                                      const std::vector<Example>& examples, const std::string& recipe,
                                      const std::function<TokenArrays(const Example&)>& tokenize, TokenizeStats* stats,
                                      const std::function<std::unique_ptr<Progress>(int64_t)>& start_progress);

}  // namespace

std::vector<TokenArrays> tokenize_dataset(Context& ctx, const std::vector<Example>& examples, const std::string& recipe,
                                          const std::function<TokenArrays(const Example&)>& tokenize,
                                          TokenizeStats* stats) {
  const std::string output_dir = ctx.run_info().output_dir;
  const std::string cache_dir = output_dir.empty() ? "" : (fs::path(output_dir) / "token_cache").string();
  return tokenize_all(ctx.tokenizer(), cache_dir, examples, recipe, tokenize, stats,
                      [&](int64_t total) { return ctx.start_progress("tokenizing examples", total); });
}

std::vector<TokenArrays> tokenize_dataset(const Tokenizer& tokenizer, const std::string& cache_dir,
                                          const std::vector<Example>& examples, const std::string& recipe,
                                          const std::function<TokenArrays(const Example&)>& tokenize,
                                          TokenizeStats* stats) {
  return tokenize_all(tokenizer, cache_dir, examples, recipe, tokenize, stats,
                      [](int64_t) { return std::make_unique<NoProgress>(); });
}

std::string describe_tokenizing(const TokenizeStats& stats, const std::string& noun) {
  char rate[64];
  std::snprintf(rate, sizeof rate, "%.2f s, %.1f MB/s", stats.seconds,
                stats.seconds > 0 ? static_cast<double>(stats.json_bytes) / 1e6 / stats.seconds : 0.0);
  const std::string cached_where =
      stats.cache_file.empty() ? "" : (stats.from_cache ? " from " : ", cached in ") + stats.cache_file;
  return std::string(stats.from_cache ? "loaded " : "tokenized ") + std::to_string(stats.examples) + " " + noun + " (" +
         rate + ")" + cached_where;
}

namespace {

std::vector<TokenArrays> tokenize_all(const Tokenizer& tokenizer, const std::string& cache_dir,
                                      const std::vector<Example>& examples, const std::string& recipe,
                                      const std::function<TokenArrays(const Example&)>& tokenize, TokenizeStats* stats,
                                      const std::function<std::unique_ptr<Progress>(int64_t)>& start_progress) {
  const auto start = std::chrono::steady_clock::now();
  const auto count = static_cast<int64_t>(examples.size());
  constexpr int64_t kGrain = 16;  // examples per task: enough work to amortise scheduling

  // The content hash is per example (in parallel), then combined in order.
  std::vector<uint64_t> hashes(examples.size());
  std::vector<int64_t> sizes(examples.size());
  at::parallel_for(0, count, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const std::string text = examples[i].fields.dump();
      hashes[i] = sdk::fnv1a(text);
      sizes[i] = static_cast<int64_t>(text.size());
    }
  });
  uint64_t content = sdk::fnv1a(recipe);
  int64_t json_bytes = 0;
  for (size_t i = 0; i < hashes.size(); ++i) {
    content = sdk::fnv1a(std::string_view(reinterpret_cast<const char*>(&hashes[i]), sizeof hashes[i]), content);
    json_bytes += sizes[i];
  }
  const ChatTemplate* chat_template = tokenizer.chat_template();
  const std::string key = "recipe=" + recipe + "\ntokenizer=" + tokenizer.fingerprint() +
                          "\nchat_template=" + (chat_template ? chat_template->fingerprint() : "none") +
                          "\nexamples=" + std::to_string(count) + " content=" + sdk::hex64(content);
  const fs::path path = cache_dir.empty() ? fs::path() : fs::path(cache_dir) / (sdk::hex64(sdk::fnv1a(key)) + ".bin");

  TokenizeStats local;
  local.examples = count;
  local.json_bytes = json_bytes;
  local.cache_file = path.string();
  std::vector<TokenArrays> data;
  if (auto cached = path.empty() ? std::nullopt : read_cache(path, key, examples.size())) {
    data = std::move(*cached);
    local.from_cache = true;
  } else {
    data.resize(examples.size());
    // Chunks in turn, each tokenized in parallel, so that progress advances
    // from this thread only.
    constexpr int64_t kProgressChunk = 4096;
    const std::unique_ptr<Progress> progress = start_progress(count);
    for (int64_t chunk_begin = 0; chunk_begin < count; chunk_begin += kProgressChunk) {
      const int64_t chunk_end = std::min(count, chunk_begin + kProgressChunk);
      at::parallel_for(chunk_begin, chunk_end, kGrain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          data[i] = tokenize(examples[i]);
          for (const auto& array : data[i]) {
            for (const int64_t value : array) {
              if (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max()) {
                throw Error(examples[i].location + ": token value " + std::to_string(value) + " does not fit in int32");
              }
            }
          }
        }
      });
      progress->advance(chunk_end - chunk_begin);
    }
    progress->finish();
    if (!path.empty()) write_cache(path, key, data);
  }
  local.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (stats) *stats = local;
  return data;
}

}  // namespace

}  // namespace ptrain::sdk
