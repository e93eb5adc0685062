#include "core/app/output_file.h"

#include "ptrain/sdk/errors.h"

#include <filesystem>
#include <fstream>

namespace ptrain::app {
namespace fs = std::filesystem;

void check_output_dir(const std::string& path, const std::string& option) {
  const fs::path dir = fs::absolute(path).parent_path();
  if (!fs::is_directory(dir)) throw sdk::UsageError(option + " " + path + ": no directory " + dir.string());
  if (fs::is_directory(path)) throw sdk::UsageError(option + " " + path + ": is a directory; give a file name");
}

void write_file_atomically(const std::string& path, const std::string& option,
                           const std::function<void(std::ostream&)>& write) {
  const std::string partial = path + ".part";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    if (!out) throw sdk::Error(option + " " + path + ": cannot write " + partial);
    write(out);
    out.flush();
    if (!out) throw sdk::Error(option + " " + path + ": writing " + partial + " failed");
  }
  std::error_code error;
  fs::rename(partial, path, error);
  if (error) throw sdk::Error(option + " " + path + ": cannot rename " + partial + " into place: " + error.message());
}

}  // namespace ptrain::app
