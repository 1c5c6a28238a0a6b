#include "catch.hpp"
#include "thrown.hpp"

#include <roofsim/report/atomic_write.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace roofsim;
namespace fs = std::filesystem;

namespace {

std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

/// A fresh, empty directory for one test.
fs::path scratch(const std::string& name) {
    const fs::path dir = fs::temp_directory_path() / ("roofsim-atomic-" + name);
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

/// The names in `dir`, sorted.
std::string listing(const fs::path& dir) {
    std::string names;
    std::vector<std::string> all;
    for (const auto& e : fs::directory_iterator(dir)) all.push_back(e.path().filename().string());
    std::sort(all.begin(), all.end());
    for (const auto& n : all) names += n + ";";
    return names;
}

}  // namespace

TEST_CASE("a file written atomically replaces the old one and leaves nothing else behind", "[report][atomic]") {
    const fs::path dir = scratch("replace");
    write_file_atomically(dir / "a.svg", "first");
    CHECK(read(dir / "a.svg") == "first");
    fs::permissions(dir / "a.svg", fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
    write_file_atomically(dir / "a.svg", "second, longer");
    CHECK(read(dir / "a.svg") == "second, longer");
    // the replaced file's permissions are kept
    CHECK((fs::status(dir / "a.svg").permissions() & fs::perms::all) ==
          (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));
    CHECK(listing(dir) == "a.svg;");
    fs::remove_all(dir);
}

TEST_CASE("a symbolic link is followed: the file it points at is replaced, the link kept", "[report][atomic]") {
    const fs::path dir = scratch("link");
    fs::create_directories(dir / "real");
    std::ofstream(dir / "real" / "r.svg") << "old";
    fs::create_symlink("real/r.svg", dir / "hop.svg");  // relative: from the link's directory
    fs::create_symlink(dir / "hop.svg", dir / "link.svg");  // a chain of two
    write_file_atomically(dir / "link.svg", "new");
    CHECK(fs::is_symlink(dir / "link.svg"));
    CHECK(fs::is_symlink(dir / "hop.svg"));
    CHECK(read(dir / "real" / "r.svg") == "new");
    CHECK(listing(dir / "real") == "r.svg;");
    // a dangling link: the file it names is created
    fs::create_symlink("real/made.svg", dir / "dangling.svg");
    write_file_atomically(dir / "dangling.svg", "made");
    CHECK(fs::is_symlink(dir / "dangling.svg"));
    CHECK(read(dir / "real" / "made.svg") == "made");
    fs::remove_all(dir);
}

TEST_CASE("a write that cannot be made names the file and keeps what was there", "[report][atomic]") {
    const fs::path dir = scratch("fail");
    // no such directory
    const std::string missing = thrown_by([&] { write_file_atomically(dir / "missing" / "x.svg", "text"); });
    CHECK(has(missing, (dir / "missing" / "x.svg").string() + ": cannot create a temporary file in"));
    CHECK(has(missing, "No such file or directory"));
    // the target is a directory: the rename fails, the directory and its contents stay
    fs::create_directories(dir / "taken.svg");
    std::ofstream(dir / "taken.svg" / "inside") << "kept";
    const std::string taken = thrown_by([&] { write_file_atomically(dir / "taken.svg", "text"); });
    CHECK(has(taken, (dir / "taken.svg").string() + ": cannot replace the file"));
    CHECK(read(dir / "taken.svg" / "inside") == "kept");
    CHECK(listing(dir) == "taken.svg;");  // no temporary file left
    fs::remove_all(dir);
}
