#include "resnet_ddp/train/metrics_log.h"

#include "resnet_ddp/error.h"

namespace rddp {

MetricsLog::MetricsLog(const std::string& path, bool active) {
  if (path.empty() || !active) return;
  file_.open(path, std::ios::app);
  if (!file_)
    fail("--log-json: cannot open '", path, "' for appending; check the directory exists and is ",
         "writable");
}

void MetricsLog::write(const JsonLine& record) {
  if (!file_.is_open()) return;
  file_ << record.text() << '\n';
  file_.flush();
}

}  // namespace rddp
