#include "core/file_mapping.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

namespace cellm {

StatusOr<FileMapping> FileMapping::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open '" + path + "': " + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    std::string reason = std::strerror(errno);
    ::close(fd);
    return io_error("cannot stat '" + path + "': " + reason);
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return invalid_argument("'" + path + "' is not a regular file");
  }
  FileMapping mapping;
  mapping.path_ = path;
  mapping.size_bytes_ = static_cast<size_t>(info.st_size);
  if (mapping.size_bytes_ > 0) {
    void* address = ::mmap(nullptr, mapping.size_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (address == MAP_FAILED) {
      std::string reason = std::strerror(errno);
      ::close(fd);
      return io_error("cannot map '" + path + "': " + reason);
    }
    mapping.data_ = static_cast<const uint8_t*>(address);
  }
  ::close(fd);
  return mapping;
}

FileMapping::FileMapping(FileMapping&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_bytes_(std::exchange(other.size_bytes_, 0)),
      path_(std::move(other.path_)) {}

FileMapping& FileMapping::operator=(FileMapping&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_bytes_ = std::exchange(other.size_bytes_, 0);
    path_ = std::move(other.path_);
  }
  return *this;
}

FileMapping::~FileMapping() { reset(); }

void FileMapping::reset() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_bytes_);
  data_ = nullptr;
  size_bytes_ = 0;
}

StatusOr<std::string> read_file_to_string(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error("cannot open '" + path + "': " + std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return io_error("cannot read '" + path + "'");
  return buffer.str();
}

}  // namespace cellm
