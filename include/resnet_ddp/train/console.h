#pragma once
// What the user sees. Information comes from rank 0 only; warnings and errors come from any
// rank, prefixed "[rank r/W host]" so that a Slurm log of many ranks says who spoke. Every line
// goes out printable (printable.h): a path given on the command line or found on disk cannot
// split it into lines that pass for other output, or drive the terminal.
#include <string>
#include <utility>
#include <vector>

namespace rddp {

class Console {
 public:
  Console(int rank, int world_size, std::string host);

  bool is_main() const { return rank_ == 0; }
  // stdout is a terminal: rank 0 redraws one progress line instead of printing many.
  bool interactive() const { return interactive_; }
  std::string prefix() const;  // "[rank 1/4 node07]"

  void info(const std::string& line) const;
  void warn(const std::string& line) const;
  // An aligned two-column table under a title (rank 0).
  void table(const std::string& title, const std::vector<std::pair<std::string, std::string>>& rows) const;
  // Redraws the progress line in place on a terminal (rank 0); ends it with end_progress().
  void progress(const std::string& line) const;
  void end_progress() const;

 private:
  int rank_, world_size_;
  std::string host_;
  bool interactive_;
  mutable bool progress_open_ = false;
};

}  // namespace rddp
