#pragma once
// One run at a time writes a checkpoint directory. Two runs given the same --checkpoint-dir
// would each resume from the other's checkpoints and remove them (--keep-checkpoints). Rank 0
// holds an exclusive flock on DIR/resnet_ddp.lock for the whole run; the kernel releases it
// when the process ends, however it ends, so a killed run leaves no stale lock, and a requeued
// job takes the lock again at once. The file holds who has it (host, pid, Slurm or PBS job,
// start time) for the message of a run refused.
#include <string>

namespace rddp {

class CheckpointDirLock {
 public:
  // Locks `dir` (which must exist). Throws Error naming the holder and the fix when another
  // run holds it. Where the file system has no locks (Lustre mounted without flock), nothing is
  // held and note() says so.
  explicit CheckpointDirLock(const std::string& dir);
  ~CheckpointDirLock();
  CheckpointDirLock(const CheckpointDirLock&) = delete;
  CheckpointDirLock& operator=(const CheckpointDirLock&) = delete;

  // A warning for the user, or "".
  const std::string& note() const { return note_; }

  static constexpr const char* kFileName = "resnet_ddp.lock";

 private:
  int fd_ = -1;
  std::string note_;
};

}  // namespace rddp
