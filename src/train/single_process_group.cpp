// The group of a run with one rank: nothing to communicate.
#include <unistd.h>

#include <climits>

#include "resnet_ddp/train/process_group.h"

namespace rddp {

namespace {

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

class SingleProcessGroup final : public ProcessGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int ranks_on_node() const override { return 1; }
  const std::string& host() const override { return host_; }
  void attach(Engine&) override {}
  StepHooks* step_hooks() override { return nullptr; }
  std::string describe() const override { return ""; }
  Metrics sum(const Metrics& local) override { return local; }
  void require_same(int64_t, const std::string&) override {}
  bool any(bool flag) override { return flag; }

 private:
  std::string host_ = host_name();
};

}  // namespace

std::unique_ptr<ProcessGroup> make_single_process_group() {
  return std::make_unique<SingleProcessGroup>();
}

}  // namespace rddp
