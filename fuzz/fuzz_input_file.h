// The readers under fuzzing take a path: each input is written to one file
// per fuzzing process and read back from there.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace ptrain::fuzz {

inline std::filesystem::path write_input(const uint8_t* data, size_t size, const std::string& name) {
  static const std::filesystem::path dir = [] {
    const auto path = std::filesystem::temp_directory_path() / ("ptrain_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
    return path;
  }();
  const std::filesystem::path path = dir / name;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

}  // namespace ptrain::fuzz
