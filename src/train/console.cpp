#include "resnet_ddp/train/console.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "resnet_ddp/printable.h"

namespace rddp {

Console::Console(int rank, int world_size, std::string host)
    : rank_(rank),
      world_size_(world_size),
      host_(std::move(host)),
      // Launchers hand rank 0 a pseudo-terminal even when their own output goes to a log file,
      // so only a job of one rank redraws its progress line in place.
      interactive_(world_size == 1 && isatty(STDOUT_FILENO) == 1) {}

std::string Console::prefix() const {
  return "[rank " + std::to_string(rank_) + "/" + std::to_string(world_size_) + " " + host_ + "]";
}

void Console::info(const std::string& line) const {
  if (!is_main()) return;
  end_progress();
  std::fprintf(stdout, "%s\n", printable(line).c_str());
  std::fflush(stdout);
}

void Console::warn(const std::string& line) const {
  end_progress();
  std::fprintf(stderr, "%s warning: %s\n", prefix().c_str(), printable(line).c_str());
  std::fflush(stderr);
}

void Console::table(const std::string& title,
                    const std::vector<std::pair<std::string, std::string>>& rows) const {
  if (!is_main()) return;
  size_t width = 0;
  for (const auto& row : rows) width = std::max(width, row.first.size());
  std::string text = title + "\n";
  for (const auto& [key, value] : rows)
    text += "  " + key + std::string(width - key.size() + 2, ' ') + printable(value) + "\n";
  end_progress();
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

void Console::progress(const std::string& line) const {
  if (!is_main()) return;
  if (interactive_) {
    std::fprintf(stdout, "\r\033[K%s", printable(line).c_str());
    progress_open_ = true;
  } else {
    std::fprintf(stdout, "%s\n", printable(line).c_str());
  }
  std::fflush(stdout);
}

void Console::end_progress() const {
  if (!progress_open_) return;
  progress_open_ = false;
  std::fprintf(stdout, "\n");
  std::fflush(stdout);
}

}  // namespace rddp
