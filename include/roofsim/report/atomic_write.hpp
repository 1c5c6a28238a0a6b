#pragma once
/// Writing a file atomically: a reader sees the old file or the whole new one, never part of one.

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace roofsim {

namespace detail {

/// The file a path names: a symbolic link followed to what it points at (which need not exist yet).
[[nodiscard]] inline std::filesystem::path resolve_links(std::filesystem::path path) {
    for (int hops = 0; hops < 40; ++hops) {  // 40: Linux's limit on links in a path (ELOOP)
        std::error_code ec;
        if (!std::filesystem::is_symlink(path, ec)) return path;
        const std::filesystem::path link = std::filesystem::read_symlink(path, ec);
        if (ec) throw std::runtime_error(path.string() + ": cannot read the link: " + ec.message());
        path = link.is_absolute() ? link : path.parent_path() / link;
    }
    throw std::runtime_error(path.string() + ": too many levels of symbolic links");
}

/// Writes all of `text` to the file descriptor `fd`; false (errno set) where a write fails.
[[nodiscard]] inline bool write_all(int fd, std::string_view text) {
    while (!text.empty()) {
        const ssize_t n = ::write(fd, text.data(), text.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (n == 0) errno = EIO;
            return false;
        }
        text.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

}  // namespace detail

/// Writes `text` to `path` atomically: to a temporary file in the same directory, flushed to disk
/// (fsync), then renamed over the target. Where `path` is a symbolic link, the file it points at is
/// replaced and the link kept. On failure the old file is left as it was, the temporary file is
/// removed, and the error (std::runtime_error) names `path`.
inline void write_file_atomically(const std::filesystem::path& path, std::string_view text) {
    const std::filesystem::path target = detail::resolve_links(path);
    const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
    const auto fail = [&](const std::string& what, int error) {
        throw std::runtime_error(path.string() + ": " + what + ": " + std::strerror(error));
    };
    std::random_device rng;
    std::filesystem::path tmp;
    int fd = -1;
    for (int attempt = 0; fd < 0; ++attempt) {
        std::string name(1, '.');  // hidden: ".<name>.tmp-<random>"
        name += target.filename().string();
        name += ".tmp-";
        name += std::to_string(rng());
        tmp = dir / name;
        fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && (errno != EEXIST || attempt >= 8)) {
            const int error = errno;
            std::string what = "cannot create a temporary file in ";
            what += dir.string();
            fail(what, error);
        }
    }
    struct stat old {};
    if (::stat(target.c_str(), &old) == 0) (void)::fchmod(fd, old.st_mode & 07777);  // the replaced file's permissions
    if (!detail::write_all(fd, text) || ::fsync(fd) != 0) {
        const int error = errno;
        ::close(fd);
        ::unlink(tmp.c_str());
        fail("write failed", error);
    }
    if (::close(fd) != 0) {
        const int error = errno;
        ::unlink(tmp.c_str());
        fail("write failed", error);
    }
    if (::rename(tmp.c_str(), target.c_str()) != 0) {
        const int error = errno;
        ::unlink(tmp.c_str());
        fail("cannot replace the file", error);
    }
    // the rename itself made durable: the directory synced (where the file system allows it)
    const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {
        (void)::fsync(dir_fd);
        ::close(dir_fd);
    }
}

namespace detail {

/// Why no file can be created in `dir` (it does not exist, is no directory, or refuses a new file),
/// or empty where one can. Tried by creating a hidden temporary file there and removing it.
[[nodiscard]] inline std::string directory_problem(const std::filesystem::path& dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::file_status status = fs::status(dir, ec);
    if (!fs::exists(status)) return "the directory " + dir.string() + " does not exist";
    if (!fs::is_directory(status)) return dir.string() + " is not a directory";
    std::random_device rng;
    const fs::path probe = dir / (".roofsim-write-check-" + std::to_string(rng()));
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        const int error = errno;
        return "cannot create a file in " + dir.string() + ": " + std::strerror(error);
    }
    ::close(fd);
    ::unlink(probe.c_str());
    return {};
}

}  // namespace detail

/// Throws std::runtime_error naming `dir` where no file can be created in it: missing, not a
/// directory, or not writable.
inline void check_writable_directory(const std::filesystem::path& dir) {
    if (const std::string problem = detail::directory_problem(dir); !problem.empty()) {
        throw std::runtime_error(dir.string() + ": " + problem);
    }
}

/// Throws std::runtime_error naming `path` where write_file_atomically(path, ...) is bound to fail:
/// its directory missing, not a directory or not writable, or the path (a symbolic link followed)
/// naming something other than a regular file, a directory say. An existing file at `path` is left
/// as it is.
inline void check_writable_file(const std::filesystem::path& path) {
    namespace fs = std::filesystem;
    const auto fail = [&](const std::string& what) { throw std::runtime_error(path.string() + ": " + what); };
    const fs::path target = detail::resolve_links(path);
    std::error_code ec;
    const fs::file_status status = fs::status(target, ec);
    if (fs::is_directory(status)) fail("is a directory, not a file");
    if (fs::exists(status) && !fs::is_regular_file(status)) fail("is not a regular file");
    const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
    if (const std::string problem = detail::directory_problem(dir); !problem.empty()) fail(problem);
}

}  // namespace roofsim
