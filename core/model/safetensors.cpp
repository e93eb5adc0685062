#include "core/model/safetensors.h"

#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

// The format stores little-endian values and we copy tensor bytes verbatim.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian host");

namespace ptrain::model {
namespace {

namespace fs = std::filesystem;
using OrderedJson = nlohmann::ordered_json;

// The reference reader's limit; a larger value means a corrupt length field.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DtypeInfo {
  const char* name;
  at::ScalarType type;
};

constexpr DtypeInfo kDtypes[] = {
    {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf}, {"BF16", at::kBFloat16}, {"I64", at::kLong},
    {"I32", at::kInt},    {"I16", at::kShort}, {"I8", at::kChar},  {"U8", at::kByte},       {"BOOL", at::kBool},
};

const DtypeInfo* find_dtype(const std::string& name) {
  for (const auto& d : kDtypes) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

const DtypeInfo* find_dtype(at::ScalarType type) {
  for (const auto& d : kDtypes) {
    if (type == d.type) return &d;
  }
  return nullptr;
}

std::string supported_dtypes() {
  std::string out;
  for (const auto& d : kDtypes) out += (out.empty() ? "" : ", ") + std::string(d.name);
  return out;
}

std::string format_shape(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

// One header entry after validation.
struct Entry {
  std::string name;
  const DtypeInfo* dtype = nullptr;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

class Reader {
 public:
  explicit Reader(const fs::path& path) : path_(path) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw sdk::ModelError(path_.string() + ": invalid safetensors file: " + what);
  }
  [[noreturn]] void fail_tensor(const std::string& name, const std::string& what) const {
    fail("tensor '" + name + "': " + what);
  }

  std::vector<std::pair<std::string, at::Tensor>> read() {
    std::error_code ec;
    const uint64_t file_size = fs::file_size(path_, ec);
    if (ec) throw sdk::ModelError(path_.string() + ": cannot read safetensors file: " + ec.message());
    std::ifstream in(path_, std::ios::binary);
    if (!in) throw sdk::ModelError(path_.string() + ": cannot open safetensors file");

    if (file_size < 8) {
      fail("truncated header: the file has " + std::to_string(file_size) +
           " bytes, fewer than the 8-byte header length field");
    }
    uint64_t header_size = 0;
    in.read(reinterpret_cast<char*>(&header_size), 8);
    if (header_size > kMaxHeaderBytes) {
      fail("header length " + std::to_string(header_size) + " exceeds the limit of " + std::to_string(kMaxHeaderBytes) +
           " bytes");
    }
    if (header_size > file_size - 8) {
      fail("header length " + std::to_string(header_size) + " runs past the end of the file (" +
           std::to_string(file_size - 8) + " bytes follow the length field)");
    }
    std::string header_text(header_size, '\0');
    in.read(header_text.data(), static_cast<std::streamsize>(header_size));
    if (!in) throw sdk::ModelError(path_.string() + ": read error in the safetensors header");

    OrderedJson header;
    try {
      header = OrderedJson::parse(header_text);
    } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number past a double
      fail(std::string("header is not valid JSON: ") + e.what());
    }
    if (!header.is_object()) fail("header is not a JSON object");

    const uint64_t data_start = 8 + header_size;
    const uint64_t data_size = file_size - data_start;
    std::vector<Entry> entries = parse_entries(header);
    check_layout(entries, data_size);

    std::vector<std::pair<std::string, at::Tensor>> out;
    out.reserve(entries.size());
    for (const Entry& e : entries) {
      at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.dtype->type));
      const uint64_t nbytes = e.end - e.begin;
      if (nbytes > 0) {
        in.seekg(static_cast<std::streamoff>(data_start + e.begin));
        in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(nbytes));
        if (!in) throw sdk::ModelError(path_.string() + ": read error in the data of tensor '" + e.name + "'");
      }
      if (e.dtype->type == at::kBool) check_bool_bytes(e, t);
      out.emplace_back(e.name, std::move(t));
    }
    return out;
  }

 private:
  std::vector<Entry> parse_entries(const OrderedJson& header) const {
    std::vector<Entry> entries;
    for (const auto& [name, info] : header.items()) {
      if (name == "__metadata__") {
        if (!info.is_object()) fail("\"__metadata__\" is not an object");
        for (const auto& [key, value] : info.items()) {
          if (!value.is_string()) fail("\"__metadata__\" value of '" + key + "' is not a string");
        }
        continue;
      }
      if (!info.is_object()) fail_tensor(name, "entry is not an object");
      Entry e;
      e.name = name;

      if (!info.contains("dtype") || !info["dtype"].is_string()) fail_tensor(name, "missing or non-string \"dtype\"");
      const std::string dtype = info["dtype"].get<std::string>();
      e.dtype = find_dtype(dtype);
      if (e.dtype == nullptr) {
        fail_tensor(name, "unknown or unsupported dtype \"" + dtype + "\" (supported: " + supported_dtypes() + ")");
      }

      if (!info.contains("shape") || !info["shape"].is_array()) fail_tensor(name, "missing or non-array \"shape\"");
      uint64_t numel = 1;
      bool overflow = false;
      for (const auto& d : info["shape"]) {
        if (!d.is_number_unsigned()) fail_tensor(name, "shape entry " + d.dump() + " is not a non-negative integer");
        const uint64_t dim = d.get<uint64_t>();
        if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) overflow = true;
        e.shape.push_back(static_cast<int64_t>(dim));
        if (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / dim) overflow = true;
        numel *= dim;
      }
      const uint64_t elem_size = c10::elementSize(e.dtype->type);
      if (overflow || (numel != 0 && numel > std::numeric_limits<uint64_t>::max() / elem_size)) {
        fail_tensor(name, "shape " + format_shape(e.shape) + " overflows");
      }

      const OrderedJson* offsets = info.contains("data_offsets") ? &info["data_offsets"] : nullptr;
      if (offsets == nullptr || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
          !(*offsets)[1].is_number_unsigned()) {
        fail_tensor(name, "\"data_offsets\" must be [begin, end] with non-negative integers");
      }
      e.begin = (*offsets)[0].get<uint64_t>();
      e.end = (*offsets)[1].get<uint64_t>();
      if (e.end < e.begin) fail_tensor(name, "data_offsets " + offsets->dump() + " end before they begin");
      if (e.end - e.begin != numel * elem_size) {
        fail_tensor(name, "size mismatch: shape " + format_shape(e.shape) + " of dtype " + dtype + " needs " +
                              std::to_string(numel * elem_size) + " bytes but data_offsets " + offsets->dump() +
                              " span " + std::to_string(e.end - e.begin));
      }
      entries.push_back(std::move(e));
    }
    return entries;
  }

  // Offsets must tile [0, data_size) exactly, as the reference reader requires.
  void check_layout(std::vector<Entry>& entries, uint64_t data_size) const {
    std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t expected = 0;
    const Entry* previous = nullptr;
    for (const Entry& e : entries) {
      const std::string range = "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
      if (e.begin < expected) {
        fail_tensor(e.name, "data_offsets " + range + " overlap tensor '" + previous->name + "' ending at " +
                                std::to_string(expected));
      }
      if (e.begin > expected) {
        fail_tensor(e.name, "data_offsets " + range + " leave a gap of " + std::to_string(e.begin - expected) +
                                " bytes before the tensor");
      }
      if (e.end > data_size) {
        fail_tensor(e.name, "data_offsets " + range + " run past the end of the data (" + std::to_string(data_size) +
                                " bytes after the header): the file is truncated");
      }
      expected = e.end;
      previous = &e;
    }
    if (expected != data_size) {
      fail(std::to_string(data_size - expected) + " trailing bytes after the last tensor (data is " +
           std::to_string(data_size) + " bytes, tensors cover " + std::to_string(expected) + ")");
    }
  }

  // A bool tensor holding other bytes than 0/1 has undefined behaviour in ATen.
  void check_bool_bytes(const Entry& e, const at::Tensor& t) const {
    const auto* bytes = static_cast<const uint8_t*>(t.data_ptr());
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (bytes[i] > 1)
        fail_tensor(e.name,
                    "BOOL byte " + std::to_string(bytes[i]) + " at element " + std::to_string(i) + " is not 0 or 1");
    }
  }

  const fs::path& path_;
};

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> read_safetensors(const std::filesystem::path& path) {
  return Reader(path).read();
}

SafetensorsWriter::SafetensorsWriter(std::filesystem::path path, const std::vector<TensorHeader>& entries,
                                     const std::map<std::string, std::string>& metadata)
    : path_(std::move(path)), entries_(entries) {
  OrderedJson meta = OrderedJson::object();
  for (const auto& [key, value] : metadata) meta[key] = value;
  if (!meta.contains("format")) meta["format"] = "pt";

  OrderedJson header = OrderedJson::object();
  header["__metadata__"] = std::move(meta);
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const TensorHeader& entry : entries_) {
    const std::string where = path_.string() + ": cannot write tensor '" + entry.name + "': ";
    if (entry.name.empty() || entry.name == "__metadata__") throw sdk::ModelError(where + "reserved or empty name");
    if (!seen.insert(entry.name).second) throw sdk::ModelError(where + "duplicate name");
    const DtypeInfo* dtype = find_dtype(entry.dtype);
    if (dtype == nullptr) {
      throw sdk::ModelError(where + "dtype " + std::string(c10::toString(entry.dtype)) +
                            " is not supported (supported: " + supported_dtypes() + ")");
    }
    int64_t numel = 1;
    for (const int64_t size : entry.shape) numel *= size;
    const uint64_t nbytes = static_cast<uint64_t>(numel) * c10::elementSize(entry.dtype);
    header[entry.name] = {{"dtype", dtype->name}, {"shape", entry.shape}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }

  std::string header_text = header.dump();
  // Tensor data then starts 8-byte aligned, as the reference writer does.
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  const uint64_t header_size = header_text.size();
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_) throw sdk::ModelError(path_.string() + ": cannot open for writing");
  out_.write(reinterpret_cast<const char*>(&header_size), 8);
  out_.write(header_text.data(), static_cast<std::streamsize>(header_text.size()));
  check_stream();
}

void SafetensorsWriter::append(const at::Tensor& tensor) {
  if (written_ == entries_.size()) throw sdk::ModelError(path_.string() + ": more tensors than the header lists");
  const TensorHeader& entry = entries_[written_];
  const std::string where = path_.string() + ": cannot write tensor '" + entry.name + "': ";
  if (!tensor.defined()) throw sdk::ModelError(where + "undefined tensor");
  if (tensor.scalar_type() != entry.dtype || tensor.sizes().vec() != entry.shape) {
    throw sdk::ModelError(where + "the header says " + std::string(c10::toString(entry.dtype)) + " " +
                          format_shape(entry.shape) + ", given " + std::string(c10::toString(tensor.scalar_type())) +
                          " " + format_shape(tensor.sizes().vec()));
  }
  const at::Tensor t = tensor.detach().to(at::kCPU).contiguous();
  const auto nbytes = static_cast<std::streamsize>(t.numel() * t.element_size());
  if (nbytes > 0) out_.write(static_cast<const char*>(t.data_ptr()), nbytes);
  check_stream();
  ++written_;
}

void SafetensorsWriter::finish() {
  if (written_ != entries_.size()) {
    throw sdk::ModelError(path_.string() + ": " + std::to_string(written_) + " of " +
                          std::to_string(entries_.size()) + " tensors written");
  }
  out_.flush();
  check_stream();
  out_.close();
}

void SafetensorsWriter::check_stream() {
  if (!out_) throw sdk::ModelError(path_.string() + ": write failed (disk full or I/O error)");
}

void write_safetensors(const std::filesystem::path& path,
                       const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<TensorHeader> entries;
  entries.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined()) throw sdk::ModelError(path.string() + ": cannot write tensor '" + name + "': undefined tensor");
    entries.push_back({name, tensor.scalar_type(), tensor.sizes().vec()});
  }
  SafetensorsWriter writer(path, entries, metadata);
  for (const auto& named : tensors) writer.append(named.second);
  writer.finish();
}

}  // namespace ptrain::model
