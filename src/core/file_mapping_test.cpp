#include "core/file_mapping.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace cellm {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "." + std::to_string(::getpid())))
      .string();
}

TEST(FileMappingTest, MapsTheWholeFileReadOnly) {
  const std::string path = temp_path("cellm_mapping");
  {
    std::ofstream out(path, std::ios::binary);
    out << "hello cells";
  }
  StatusOr<FileMapping> mapping = FileMapping::open(path);
  ASSERT_TRUE(mapping.ok()) << mapping.status().to_string();
  std::span<const uint8_t> bytes = mapping->bytes();
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), "hello cells");
  FileMapping moved = std::move(*mapping);
  EXPECT_EQ(moved.size_bytes(), 11u);
  EXPECT_EQ(mapping->size_bytes(), 0u);
  std::remove(path.c_str());
}

TEST(FileMappingTest, EmptyFileMapsToAnEmptySpan) {
  const std::string path = temp_path("cellm_empty");
  { std::ofstream out(path, std::ios::binary); }
  StatusOr<FileMapping> mapping = FileMapping::open(path);
  ASSERT_TRUE(mapping.ok());
  EXPECT_TRUE(mapping->bytes().empty());
  std::remove(path.c_str());
}

TEST(FileMappingTest, MissingFileIsAnErrorNamingThePath) {
  StatusOr<FileMapping> mapping = FileMapping::open("/nonexistent/cellm/model.gguf");
  ASSERT_FALSE(mapping.ok());
  EXPECT_EQ(mapping.status().code(), StatusCode::kIoError);
  EXPECT_NE(mapping.status().message().find("/nonexistent/cellm/model.gguf"), std::string::npos);
}

TEST(FileMappingTest, DirectoryIsRefused) {
  StatusOr<FileMapping> mapping = FileMapping::open("/tmp");
  ASSERT_FALSE(mapping.ok());
  EXPECT_NE(mapping.status().message().find("not a regular file"), std::string::npos);
}

}  // namespace
}  // namespace cellm
