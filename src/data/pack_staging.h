#pragma once
// Where resnet_ddp_pack writes a run's splits before they count: OUTPUT/rddp-pack.tmp.<pid>/.
// commit() moves them into OUTPUT and removes every split this run did not write, so OUTPUT
// never keeps a val.rddp-pack of an earlier run beside a new train.rddp-pack. A run that fails
// or is stopped before commit() leaves OUTPUT's earlier pack as it was; a run killed outright
// leaves its staging folder, which the next run removes. Should a run stop between commit()'s
// two renames, the splits' run ids differ and training refuses them (open_packed).
#include <functional>
#include <string>
#include <vector>

namespace rddp::data {

class PackStaging {
 public:
  // Creates OUTPUT (and the staging folder in it) after removing what stopped runs left
  // behind, calling `note` with a line for each removal. Refuses to start while another
  // resnet_ddp_pack of this machine is writing into OUTPUT.
  PackStaging(const std::string& output, const std::function<void(const std::string&)>& note);
  ~PackStaging();  // removes the staging folder with whatever is still in it
  PackStaging(const PackStaging&) = delete;
  PackStaging& operator=(const PackStaging&) = delete;

  // Where to write the split file `name` (e.g. "train.rddp-pack") before commit().
  std::string staged(const std::string& name) const;
  // Moves each of `written` into OUTPUT, the last of them last, and removes those of `all`
  // this run did not write.
  void commit(const std::vector<std::string>& written, const std::vector<std::string>& all);

 private:
  std::string output_, staging_;
};

}  // namespace rddp::data
