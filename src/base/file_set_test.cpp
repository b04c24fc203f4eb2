#include "base/file_set.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "base/error.h"

namespace infernix {
namespace {

TEST(DirFileSet, ReadsFilesAndNamesMissingOnes) {
  auto dir = std::filesystem::temp_directory_path() / "infernix_file_set_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "a.txt") << "hello";
  DirFileSet files(dir.string());
  EXPECT_TRUE(files.Exists("a.txt"));
  EXPECT_FALSE(files.Exists("b.txt"));
  EXPECT_EQ(ReadText(files, "a.txt"), "hello");
  try {
    files.Open("b.txt");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("b.txt"), std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

TEST(DirFileSet, RejectsMissingFolderAndFile) {
  EXPECT_THROW(DirFileSet("/nonexistent/infernix/folder"), Error);
  auto file = std::filesystem::temp_directory_path() / "infernix_file_set_plain";
  std::ofstream(file) << "x";
  EXPECT_THROW(DirFileSet(file.string()), Error);
  std::filesystem::remove(file);
}

TEST(MemoryFileSet, ServesAddedFiles) {
  MemoryFileSet files("<test>");
  files.AddCopy("config.json", "{}");
  EXPECT_TRUE(files.Exists("config.json"));
  EXPECT_EQ(ReadText(files, "config.json"), "{}");
  EXPECT_THROW(files.Open("x"), Error);
  EXPECT_EQ(files.DisplayPath("x"), "<test>/x");
}

}  // namespace
}  // namespace infernix
