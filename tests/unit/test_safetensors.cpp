// safetensors I/O: round trips, a hand-assembled file read byte for byte and
// the writer's layout parsed independently. The reader's rejections are in
// tests/bad_inputs/test_bad_safetensors.cpp.

#include "catch.h"

#include <ATen/ATen.h>

#include "core/model/safetensors.h"
#include "ptrain/sdk/errors.h"
#include "support/test_util.h"

#include <nlohmann/json.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

namespace fs = std::filesystem;
using ptrain::model::SafetensorsWriter;
using ptrain::model::TensorHeader;
using ptrain::model::read_safetensors;
using ptrain::model::write_safetensors;
using ptrain::testing::bytes_of;
using ptrain::testing::contains;
using ptrain::testing::TempDir;
using ptrain::testing::write_raw_safetensors;

TEST_CASE("safetensors round trip keeps names, order, dtypes, shapes and bits", "[safetensors]") {
  TempDir dir("ptrain_safetensors_test");
  const fs::path file = dir.path() / "t.safetensors";
  at::manual_seed(7);
  std::vector<std::pair<std::string, at::Tensor>> tensors = {
      {"f32", at::randn({2, 3})},
      {"f16", at::randn({4}).to(at::kHalf)},
      {"bf16", at::randn({2, 2}).to(at::kBFloat16)},
      {"f64", at::randn({3}, at::kDouble)},
      {"i64", at::tensor({int64_t{1} << 40, int64_t{-5}, int64_t{0}}, at::kLong)},
      {"i32", at::tensor({-7, 2147483647}, at::kInt)},
      {"i16", at::tensor({-300, 300}, at::kShort)},
      {"i8", at::tensor({-128, 127}, at::kChar)},
      {"u8", at::tensor({0, 255}, at::kByte)},
      {"bool", at::tensor({1, 0, 1}, at::kInt).to(at::kBool)},
      {"empty", at::zeros({0, 3})},
      {"scalar", at::scalar_tensor(3.25)},
      {"transposed", at::arange(6, at::kFloat).view({2, 3}).t()},  // non-contiguous input
  };
  write_safetensors(file, tensors, {{"step", "12"}});
  const auto loaded = read_safetensors(file);

  REQUIRE(loaded.size() == tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    INFO(tensors[i].first);
    CHECK(loaded[i].first == tensors[i].first);
    CHECK(loaded[i].second.scalar_type() == tensors[i].second.scalar_type());
    CHECK(loaded[i].second.sizes() == tensors[i].second.sizes());
    CHECK(at::equal(loaded[i].second, tensors[i].second));
  }
  CHECK(loaded[11].second.dim() == 0);

  // Parse the written file independently of the reader.
  std::ifstream in(file, std::ios::binary);
  uint64_t header_length = 0;
  in.read(reinterpret_cast<char*>(&header_length), 8);
  CHECK(header_length % 8 == 0);
  std::string header_text(header_length, '\0');
  in.read(header_text.data(), static_cast<std::streamsize>(header_length));
  const auto header = nlohmann::json::parse(header_text);
  CHECK(header["__metadata__"]["format"] == "pt");
  CHECK(header["__metadata__"]["step"] == "12");
  CHECK(header["f32"]["dtype"] == "F32");
  CHECK(header["bf16"]["dtype"] == "BF16");
  CHECK(header["bool"]["dtype"] == "BOOL");
  CHECK(header["scalar"]["shape"] == nlohmann::json::array());
  CHECK(header["f32"]["data_offsets"] == nlohmann::json::array({0, 24}));
  CHECK(header["f16"]["data_offsets"] == nlohmann::json::array({24, 32}));
  CHECK(fs::file_size(file) == 8 + header_length + header["transposed"]["data_offsets"][1].get<uint64_t>());
  // The transposed tensor is stored in its logical (contiguous) order.
  std::vector<float> stored(6);
  in.seekg(static_cast<std::streamoff>(8 + header_length + header["transposed"]["data_offsets"][0].get<uint64_t>()));
  in.read(reinterpret_cast<char*>(stored.data()), 24);
  CHECK(stored == std::vector<float>({0, 3, 1, 4, 2, 5}));
}

TEST_CASE("safetensors reader decodes a hand-assembled file in offset order", "[safetensors]") {
  TempDir dir("ptrain_safetensors_test");
  const fs::path file = dir.path() / "hand.safetensors";
  // Header order differs from data order; half/bfloat16 1.0 are 0x3C00 / 0x3F80.
  const std::string header = R"({"b":{"dtype":"I32","shape":[2],"data_offsets":[8,16]},)"
                             R"("a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},)"
                             R"("h":{"dtype":"F16","shape":[1],"data_offsets":[16,18]},)"
                             R"("z":{"dtype":"F32","shape":[0],"data_offsets":[18,18]},)"
                             R"("g":{"dtype":"BF16","shape":[],"data_offsets":[18,20]},)"
                             R"("__metadata__":{"format":"pt"}})";
  const std::string data = bytes_of<float>({1.5f, -2.0f}) + bytes_of<int32_t>({7, -9}) + bytes_of<uint16_t>({0x3C00}) +
                           bytes_of<uint16_t>({0x3F80});
  write_raw_safetensors(file, header, data);

  const auto loaded = read_safetensors(file);
  REQUIRE(loaded.size() == 5);
  CHECK(loaded[0].first == "a");
  CHECK(loaded[1].first == "b");
  CHECK(loaded[2].first == "h");
  CHECK(loaded[3].first == "z");  // zero-size, so before "g" which starts at the same offset
  CHECK(loaded[4].first == "g");
  CHECK(at::equal(loaded[0].second, at::tensor({1.5f, -2.0f}).view({1, 2})));
  CHECK(at::equal(loaded[1].second, at::tensor({7, -9}, at::kInt)));
  CHECK(loaded[2].second.scalar_type() == at::kHalf);
  CHECK(loaded[2].second.item<float>() == 1.0f);
  CHECK(loaded[3].second.sizes() == at::IntArrayRef{0});
  CHECK(loaded[4].second.scalar_type() == at::kBFloat16);
  CHECK(loaded[4].second.dim() == 0);
  CHECK(loaded[4].second.item<float>() == 1.0f);
}

TEST_CASE("safetensors writer rejects duplicate names and unsupported dtypes", "[safetensors]") {
  TempDir dir("ptrain_safetensors_test");
  const fs::path file = dir.path() / "w.safetensors";
  auto write_error = [&](const std::vector<std::pair<std::string, at::Tensor>>& tensors) -> std::string {
    try {
      write_safetensors(file, tensors);
    } catch (const ptrain::sdk::ModelError& e) {
      return e.what();
    }
    return "<no ModelError thrown>";
  };
  std::string msg = write_error({{"x", at::zeros({1})}, {"x", at::zeros({1})}});
  INFO(msg);
  CHECK(contains(msg, "tensor 'x'"));
  CHECK(contains(msg, "duplicate"));
  msg = write_error({{"c", at::zeros({1}, at::kComplexFloat)}});
  INFO(msg);
  CHECK(contains(msg, "tensor 'c'"));
  CHECK(contains(msg, "not supported"));
}

TEST_CASE("safetensors streaming writer checks each tensor against its header entry", "[safetensors]") {
  TempDir dir("ptrain_safetensors_test");
  const fs::path file = dir.path() / "s.safetensors";
  const std::vector<TensorHeader> headers{{"a", at::kFloat, {2, 3}}, {"b", at::kBFloat16, {4}}};
  auto error_of = [](const std::function<void()>& write) -> std::string {
    try {
      write();
    } catch (const ptrain::sdk::ModelError& e) {
      return e.what();
    }
    return "<no ModelError thrown>";
  };

  const at::Tensor a = at::arange(6, at::kFloat).view({2, 3}), b = at::randn({4}).to(at::kBFloat16);
  {
    SafetensorsWriter writer(file, headers);
    writer.append(a);
    writer.append(b);
    writer.finish();
  }
  const auto loaded = read_safetensors(file);
  REQUIRE(loaded.size() == 2);
  CHECK(loaded[0].second.equal(a));
  CHECK(loaded[1].second.equal(b));

  std::string msg = error_of([&] { SafetensorsWriter(file, headers).append(a.t()); });
  INFO(msg);
  CHECK(contains(msg, "tensor 'a': the header says Float [2, 3], given Float [3, 2]"));
  msg = error_of([&] { SafetensorsWriter(file, headers).append(a.to(at::kDouble)); });
  CHECK(contains(msg, "tensor 'a': the header says Float [2, 3], given Double [2, 3]"));
  msg = error_of([&] {
    SafetensorsWriter writer(file, headers);
    writer.append(a);
    writer.finish();
  });
  CHECK(contains(msg, "1 of 2 tensors written"));
  msg = error_of([&] {
    SafetensorsWriter writer(file, {{"a", at::kFloat, {2, 3}}});
    writer.append(a);
    writer.append(a);
  });
  CHECK(contains(msg, "more tensors than the header lists"));
  msg = error_of([&] { SafetensorsWriter(dir.path() / "missing" / "x.safetensors", headers); });
  CHECK(contains(msg, "cannot open for writing"));
}
