// checkpoint::remove_tree, what ptrain removes directories with instead of
// std::filesystem::remove_all, as core/checkpoint/remove_tree.h says: a nested tree
// goes, a symbolic link goes without what it points to, a missing path is no
// error, and a path it cannot remove is named.
#include "catch.h"

#include "support/test_util.h"

#include "core/checkpoint/remove_tree.h"

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

TEST_CASE("remove_tree removes a nested tree, never what a link points to", "[checkpoint]") {
  const ptrain::testing::TempDir temp("remove_tree");
  const fs::path tree = temp.path() / "step_100";
  fs::create_directories(tree / "a" / "b" / "c");
  for (const fs::path& dir : {tree, tree / "a", tree / "a" / "b" / "c"}) {
    for (int i = 0; i < 3; ++i) std::ofstream(dir / ("file" + std::to_string(i))) << "bytes";
  }
  fs::create_directories(temp.path() / "kept");
  std::ofstream(temp.path() / "kept" / "file") << "stays";
  fs::create_directory_symlink(temp.path() / "kept", tree / "a" / "link");

  ptrain::checkpoint::remove_tree(tree);
  CHECK_FALSE(fs::exists(tree));
  CHECK(fs::exists(temp.path() / "kept" / "file"));

  // Gone already: nothing to do. A file alone goes too.
  CHECK_NOTHROW(ptrain::checkpoint::remove_tree(tree));
  ptrain::checkpoint::remove_tree(temp.path() / "kept" / "file");
  CHECK_FALSE(fs::exists(temp.path() / "kept" / "file"));
}

TEST_CASE("remove_tree names a path it cannot remove", "[checkpoint]") {
  const ptrain::testing::TempDir temp("remove_tree_error");
  std::ofstream(temp.path() / "a_file") << "x";
  const fs::path below_a_file = temp.path() / "a_file" / "child";
  std::error_code error;
  ptrain::checkpoint::remove_tree(below_a_file, error);
  CHECK(error == std::errc::not_a_directory);
  CHECK_THAT(ptrain::testing::error_of([&] { ptrain::checkpoint::remove_tree(below_a_file); }),
             Catch::Contains(below_a_file.string() + ": cannot remove: Not a directory"));
}
