// gguf_truncate_copy SRC DST N: writes the first N bytes of SRC to DST. A test helper: the
// cellm_inspect_truncated ctest makes its truncated model with it (CMake cannot write binary).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s SRC DST NUM_BYTES\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot open '%s'\n", argv[1]);
    return 1;
  }
  std::vector<char> bytes(std::strtoull(argv[3], nullptr, 10));
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  std::ofstream out(argv[2], std::ios::binary);
  out.write(bytes.data(), in.gcount());
  if (!out) {
    std::fprintf(stderr, "cannot write '%s'\n", argv[2]);
    return 1;
  }
  return 0;
}
