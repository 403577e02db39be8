#pragma once
// The JSON-lines metrics file of --log-json, written by rank 0: one object a line, flushed as
// it is written, so that a run killed mid-way leaves every record before it whole.
#include <fstream>
#include <string>

#include "resnet_ddp/json_line.h"

namespace rddp {

class MetricsLog {
 public:
  // Inactive (writes nothing) without a path or on ranks other than 0. Throws Error naming the
  // path when it cannot be opened for appending.
  MetricsLog(const std::string& path, bool active);
  void write(const JsonLine& record);

 private:
  std::ofstream file_;
};

}  // namespace rddp
