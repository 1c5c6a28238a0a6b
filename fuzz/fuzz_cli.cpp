// The command line (run_cli, in-process): the input is its arguments, one word per space- or
// newline-separated run of characters, run from the source tree so that seeds name its files.
// Words that write files or predict whole corpora are left out (the input is skipped).

#include "fuzz_common.hpp"

#include "commands.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

bool skipped(const std::string& word) {
    static const char* const writes_or_slow[] = {"--svg", "--emit-ir", "--out", "fit-kernels", "survey", "--runs", "--kernels",
                                                 "--exported", "--max-batch", "--ddp"};
    for (const char* w : writes_or_slow) {
        if (word.rfind(w, 0) == 0) return true;
    }
    return false;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    if (::chdir(ROOFSIM_FUZZ_SOURCE_DIR) != 0) std::abort();
    const int null = ::open("/dev/null", O_WRONLY);  // standard output: the reports, not checked here
    if (null < 0 || ::dup2(null, 1) < 0) std::abort();
    ::close(null);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::vector<std::string> words{"roofsim"};
    std::string word;
    for (std::size_t i = 0; i <= size; ++i) {
        const char c = i < size ? static_cast<char>(data[i]) : ' ';
        if (c == ' ' || c == '\n') {
            if (!word.empty()) words.push_back(std::move(word));
            word.clear();
        } else if (c == '\0') {
            return 0;  // argv words hold no NUL
        } else {
            word += c;
        }
    }
    for (const auto& w : words) {
        if (skipped(w)) return 0;
    }
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    std::ostringstream errors;
    std::streambuf* const cerr = std::cerr.rdbuf(errors.rdbuf());
    const int code = roofsim::cli::run_cli(static_cast<int>(words.size()), argv.data());
    std::cerr.rdbuf(cerr);
    if (code != 0 && code != 1 && code != 2) {
        std::fprintf(stderr, "fuzz: exit code %d\n", code);
        std::abort();
    }
    return 0;
}
