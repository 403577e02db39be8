#pragma once
// The JSON-lines metrics file of --log-json, written by rank 0: one object a line, written as it
// comes, so that a run killed mid-way leaves every record before it whole.
#include <string>

#include "resnet_ddp/json_line.h"

namespace rddp {

class MetricsLog {
 public:
  // Inactive (writes nothing) without a path or on ranks other than 0. Opens the file for
  // appending at once, so that a path that cannot be written is refused before training:
  // throws Error naming the path, the reason and the fix. A FIFO is fine when a process reads
  // it (a live plot), and refused, rather than waited on, when none does.
  MetricsLog(const std::string& path, bool active);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // Appends one line. A failed write (a full disk) does not stop training, whose checkpoints
  // matter more than its log: it returns, the first time only, a warning naming the file, the
  // reason and the record lost; "" otherwise. The same once when the file was deleted while
  // the run writes it: its lines would go on into a file no one can open.
  std::string write(const JsonLine& record);
  // "" when every record was written; else how many were lost, for the end of the run.
  std::string losses() const;

 private:
  std::string path_;
  int fd_ = -1;
  long lost_ = 0;
  std::string first_loss_;
  bool removed_told_ = false;  // said that the file was deleted while being written
};

}  // namespace rddp
