// Every rejection rule of the safetensors reader (those of the reference
// reader, plus BOOL bytes), each a ModelError naming the file and, where
// there is one, the tensor; and the odd but valid files that must still load.
#include "catch.h"

#include "bad_inputs/rejection.h"
#include "support/run_command.h"
#include "support/test_util.h"

#include "core/model/safetensors.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace ptrain;
using ptrain::testing::bytes_of;
namespace fs = std::filesystem;

namespace {

struct SafetensorsCase {
  const char* name;
  std::string header;
  std::string data;
  uint64_t header_length;  // kHeaderSize: the header's own size
  std::string location;    // appended to "<file>: invalid safetensors file: " unless it starts with ':'
};
constexpr uint64_t kHeaderSize = ~uint64_t{0};

const std::string kEight = bytes_of<float>({1.0f, 2.0f});

}  // namespace

TEST_CASE("malformed safetensors files are rejected naming the file and the tensor", "[bad_inputs][safetensors]") {
  const fs::path dir = testing::fresh_test_dir("bad_safetensors");
  const std::vector<SafetensorsCase> cases = {
      {"header length beyond the limit", "{}", "", uint64_t{1} << 40, "header length 1099511627776 exceeds the limit"},
      {"header length just over 100 MB", "{}", "", 100'000'001, "header length 100000001 exceeds the limit"},
      {"header past the end of the file", "{}", "", 1000, "header length 1000 runs past the end"},
      {"header not JSON", "{not json", kEight, kHeaderSize, "header is not valid JSON"},
      {"header cut short", R"({"w":{"dtype":"F32")", "", kHeaderSize, "header is not valid JSON"},
      // nlohmann's parser throws out_of_range, not parse_error, here.
      {"header number past a double", R"({"w":{"dtype":"F32","shape":[1e400],"data_offsets":[0,8]}})", kEight,
       kHeaderSize, "header is not valid JSON"},
      {"header not UTF-8", "{\"w\xff\":{}}", "", kHeaderSize, "header is not valid JSON"},
      {"header an array", "[1,2]", "", kHeaderSize, "header is not a JSON object"},
      {"entry not an object", R"({"w":[0,4]})", "", kHeaderSize, "tensor 'w': entry is not an object"},
      {"metadata not an object", R"({"__metadata__":[1]})", "", kHeaderSize, "\"__metadata__\" is not an object"},
      {"metadata value not a string", R"({"__metadata__":{"step":3}})", "", kHeaderSize,
       "\"__metadata__\" value of 'step' is not a string"},
      {"missing dtype", R"({"w":{"shape":[2],"data_offsets":[0,8]}})", kEight, kHeaderSize,
       "tensor 'w': missing or non-string \"dtype\""},
      {"unknown dtype", R"({"w":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}})", kEight, kHeaderSize,
       "tensor 'w': unknown or unsupported dtype \"F8_E4M3\""},
      {"lower-case dtype", R"({"w":{"dtype":"f32","shape":[2],"data_offsets":[0,8]}})", kEight, kHeaderSize,
       "tensor 'w': unknown or unsupported dtype \"f32\""},
      {"shape not an array", R"({"w":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", kEight, kHeaderSize,
       "tensor 'w': missing or non-array \"shape\""},
      {"negative dimension", R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", kEight, kHeaderSize,
       "tensor 'w': shape entry -2 is not a non-negative integer"},
      {"fractional dimension", R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,8]}})", kEight, kHeaderSize,
       "tensor 'w': shape entry 1.5"},
      {"shape × dtype overflows 64 bits",
       R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", kEight, kHeaderSize,
       "tensor 'w': shape [4294967296, 4294967296] overflows"},
      {"element count × element size overflows",
       R"({"w":{"dtype":"F64","shape":[2305843009213693952,2],"data_offsets":[0,8]}})", kEight, kHeaderSize,
       "tensor 'w': shape [2305843009213693952, 2] overflows"},
      {"data_offsets missing", R"({"w":{"dtype":"F32","shape":[2]}})", kEight, kHeaderSize,
       "tensor 'w': \"data_offsets\" must be [begin, end]"},
      {"data_offsets of three", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}})", kEight, kHeaderSize,
       "tensor 'w': \"data_offsets\" must be [begin, end]"},
      {"negative offset", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", kEight, kHeaderSize,
       "tensor 'w': \"data_offsets\" must be [begin, end]"},
      {"end before begin", R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", kEight, kHeaderSize,
       "tensor 'w': data_offsets [8,0] end before they begin"},
      {"byte range does not match the shape", R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", kEight,
       kHeaderSize, "tensor 'w': size mismatch: shape [3] of dtype F32 needs 12 bytes"},
      {"overlapping tensors",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       kEight + bytes_of<float>({3.0f}), kHeaderSize, "tensor 'b': data_offsets [4, 12] overlap tensor 'a'"},
      {"two tensors on the same bytes",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})",
       kEight, kHeaderSize, "tensor 'b': data_offsets [0, 8] overlap tensor 'a'"},
      {"gap before a tensor", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", kEight, kHeaderSize,
       "tensor 'a': data_offsets [4, 8] leave a gap of 4 bytes"},
      {"gap between tensors",
       R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
       kEight + bytes_of<float>({3.0f}), kHeaderSize, "tensor 'b': data_offsets [8, 12] leave a gap of 4 bytes"},
      {"data past the end of the file", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", kEight,
       kHeaderSize, "tensor 'w': data_offsets [0, 16] run past the end of the data"},
      {"trailing bytes", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", kEight, kHeaderSize,
       "4 trailing bytes after the last tensor"},
      {"data but no tensors", "{}", kEight, kHeaderSize, "8 trailing bytes after the last tensor"},
      {"BOOL bytes other than 0 and 1", R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})",
       std::string("\x01\x07", 2), kHeaderSize, "tensor 'm': BOOL byte 7 at element 1 is not 0 or 1"},
  };
  for (const SafetensorsCase& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const fs::path file = dir / "bad.safetensors";
      testing::write_raw_safetensors(file, c.header, c.data,
                                     c.header_length == kHeaderSize ? c.header.size() : c.header_length);
      testing::check_rejected([&] { model::read_safetensors(file); }, "ModelError",
                              file.string() + ": invalid safetensors file: " + c.location);
    }
  }
}

TEST_CASE("a truncated or missing safetensors file names the file", "[bad_inputs][safetensors]") {
  const fs::path dir = testing::fresh_test_dir("bad_safetensors");
  const fs::path short_file = testing::write_text_file(dir, "short.safetensors", "abcde");
  testing::check_rejected([&] { model::read_safetensors(short_file); }, "ModelError",
                          short_file.string() + ": invalid safetensors file: truncated header: the file has 5 bytes");
  const fs::path empty = testing::write_text_file(dir, "empty.safetensors", "");
  testing::check_rejected([&] { model::read_safetensors(empty); }, "ModelError", empty.string() + ": invalid");
  const fs::path absent = dir / "absent.safetensors";
  testing::check_rejected([&] { model::read_safetensors(absent); }, "ModelError", absent.string() + ": cannot read");
}

TEST_CASE("zero-size tensors, scalars, empty and whitespace-padded headers still load", "[bad_inputs][safetensors]") {
  const fs::path dir = testing::fresh_test_dir("odd_safetensors");
  const fs::path file = dir / "odd.safetensors";

  // Spaces before and after the JSON, as writers pad the header to 8 bytes.
  testing::write_raw_safetensors(file,
                                 "  \n{\"s\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]},"
                                 "\"z\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[8,8]},"
                                 "\"e\":{\"dtype\":\"BF16\",\"shape\":[3,0],\"data_offsets\":[8,8]}}      ",
                                 bytes_of<int64_t>({-42}));
  const auto loaded = model::read_safetensors(file);
  REQUIRE(loaded.size() == 3);
  CHECK(loaded[0].first == "s");
  CHECK(loaded[0].second.dim() == 0);
  CHECK(loaded[0].second.item<int64_t>() == -42);
  CHECK(loaded[1].second.sizes() == at::IntArrayRef({0, 5}));
  CHECK(loaded[2].second.sizes() == at::IntArrayRef({3, 0}));
  CHECK(loaded[2].second.scalar_type() == at::kBFloat16);

  // No tensors at all: an empty header, and one with metadata only.
  testing::write_raw_safetensors(file, "{}", "");
  CHECK(model::read_safetensors(file).empty());
  testing::write_raw_safetensors(file, R"({"__metadata__":{"format":"pt"}})", "");
  CHECK(model::read_safetensors(file).empty());
}
