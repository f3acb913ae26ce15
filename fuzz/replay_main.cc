// Replays inputs through a fuzz target without libFuzzer (the GCC build): every file under the directories and
// files given on the command line is fed to LLVMFuzzerTestOneInput once. ctest runs this over the seed corpus and
// the real kube-scheduler fixtures (label fuzz), so the targets are exercised in every CI run; scripts/fuzz.sh
// does the coverage-guided runs with clang's libFuzzer.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  size_t inputs = 0;
  auto run = [&](const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ++inputs;
    // Every prefix of the input too: truncated bodies are the commonest malformed input.
    for (size_t cut = 1; cut < bytes.size() && cut < 4096; cut += 1 + cut / 8) {
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), cut);
      ++inputs;
    }
  };
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path p(argv[i]);
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(p)) {
        if (e.is_regular_file()) {
          run(e.path());
        }
      }
    } else if (std::filesystem::exists(p)) {
      run(p);
    }
  }
  std::cout << "replayed " << inputs << " inputs\n";
  return 0;
}
