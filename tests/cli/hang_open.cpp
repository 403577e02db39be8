// A stand-in for a hung network mount, for the command-line tests: loaded with LD_PRELOAD, it
// makes every open of a path containing $RDDP_HANG_OPEN (a file, or a folder to list) wait
// forever, as a read of a file on an NFS server that stopped answering does. Signals interrupt the wait and it goes on waiting.
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

void hang_if_marked(const char* path) {
  const char* marker = std::getenv("RDDP_HANG_OPEN");
  if (!marker || !*marker || !path || !std::strstr(path, marker)) return;
  for (;;) pause();
}

template <typename Fn>
Fn next_definition(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

mode_t mode_argument(int flags, va_list arguments) {
  return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? mode_t(va_arg(arguments, int)) : 0;
}

}  // namespace

extern "C" {

int open(const char* path, int flags, ...) {
  va_list arguments;
  va_start(arguments, flags);
  const mode_t mode = mode_argument(flags, arguments);
  va_end(arguments);
  hang_if_marked(path);
  static const auto real = next_definition<int (*)(const char*, int, ...)>("open");
  return real(path, flags, mode);
}

int open64(const char* path, int flags, ...) {
  va_list arguments;
  va_start(arguments, flags);
  const mode_t mode = mode_argument(flags, arguments);
  va_end(arguments);
  hang_if_marked(path);
  static const auto real = next_definition<int (*)(const char*, int, ...)>("open64");
  return real(path, flags, mode);
}

int openat(int dir, const char* path, int flags, ...) {
  va_list arguments;
  va_start(arguments, flags);
  const mode_t mode = mode_argument(flags, arguments);
  va_end(arguments);
  hang_if_marked(path);
  static const auto real = next_definition<int (*)(int, const char*, int, ...)>("openat");
  return real(dir, path, flags, mode);
}

// glibc's fopen opens through its own internal symbol, which open() above does not catch.
FILE* fopen(const char* path, const char* mode) {
  hang_if_marked(path);
  static const auto real = next_definition<FILE* (*)(const char*, const char*)>("fopen");
  return real(path, mode);
}

FILE* fopen64(const char* path, const char* mode) {
  hang_if_marked(path);
  static const auto real = next_definition<FILE* (*)(const char*, const char*)>("fopen64");
  return real(path, mode);
}

// What _FORTIFY_SOURCE builds call for open(path, flags) without a mode.
int __open_2(const char* path, int flags) {
  hang_if_marked(path);
  static const auto real = next_definition<int (*)(const char*, int)>("__open_2");
  return real(path, flags);
}

int __open64_2(const char* path, int flags) {
  hang_if_marked(path);
  static const auto real = next_definition<int (*)(const char*, int)>("__open64_2");
  return real(path, flags);
}

// A folder listed on a hung mount (std::filesystem's directory iterator opens it here).
DIR* opendir(const char* path) {
  hang_if_marked(path);
  static const auto real = next_definition<DIR* (*)(const char*)>("opendir");
  return real(path);
}

}  // extern "C"
