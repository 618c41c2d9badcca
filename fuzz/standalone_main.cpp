// Runs a libFuzzer target (LLVMFuzzerTestOneInput) once over every file of the given files and
// directories (recursively), so the committed seed corpus is replayed by any compiler in
// `make test`. With clang, `-DPF_FUZZ=ON` links the same target against libFuzzer instead.
// Exit status: 0 when every input ran (a crash aborts the process, naming nothing: the last
// "running" line on stderr says which file it was), 2 on a usage error or an unreadable path.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

namespace {

bool read_file(const std::filesystem::path& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path root = argv[i];
    std::error_code ec;
    if (std::filesystem::is_directory(root, ec)) {
      for (const auto& entry : std::filesystem::recursive_directory_iterator(root, ec)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
    } else if (std::filesystem::is_regular_file(root, ec)) {
      files.push_back(root);
    }
    if (ec) {
      std::fprintf(stderr, "cannot read %s: %s\n", root.c_str(), ec.message().c_str());
      return 2;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "no input files under the given paths\n");
    return 2;
  }
  std::string data;
  for (const auto& file : files) {
    if (!read_file(file, data)) {
      std::fprintf(stderr, "cannot read %s\n", file.c_str());
      return 2;
    }
    std::fprintf(stderr, "running %s (%zu bytes)\n", file.c_str(), data.size());
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(data.data()), data.size());
  }
  std::printf("%zu inputs ran without a crash\n", files.size());
  return 0;
}
