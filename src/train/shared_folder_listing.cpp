#include "resnet_ddp/train/shared_folder_listing.h"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "resnet_ddp/ddp/fatal.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/printable.h"
#include "resnet_ddp/train/preemption.h"

namespace rddp {

namespace {

// The first byte says what follows: a listing, rank 0's error message, or that a preemption
// request stopped the listing.
constexpr char kListing = 'L';
constexpr char kError = 'E';
constexpr char kPreempted = 'P';

// Rank 0's walk of `root`, as the message it sends. The walk runs on a thread of its own while
// this one watches for a preemption request: ImageNet on a busy parallel file system takes
// minutes, a hung mount forever, and a preempted job has Slurm's KillWait (30 s) to leave with
// the code that requeues it. A walk given up on is left to finish (detached) with what it
// holds; the process ends soon after.
std::string list_unless_preempted(const std::string& root, bool may_be_absent) {
  struct Walk {
    std::mutex mutex;
    std::condition_variable done_changed;
    bool done = false;
    std::string message;
  };
  const auto walk = std::make_shared<Walk>();
  const auto started = std::chrono::steady_clock::now();
  std::thread([walk, root, may_be_absent] {
    std::string message;
    try {
      message = kListing + data::encode_listing(data::list_image_folder(root, may_be_absent));
    } catch (const std::exception& error) {
      message = kError + std::string(error.what());
    }
    const std::lock_guard<std::mutex> lock(walk->mutex);
    walk->message = std::move(message);
    walk->done = true;
    walk->done_changed.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(walk->mutex);
  while (!walk->done_changed.wait_for(lock, std::chrono::milliseconds(100),
                                      [&] { return walk->done; }))
    if (preemption_requested()) {
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      return kPreempted + std::string("preempted (") + preemption_cause() +
             ") while rank 0 listed " + printable(root) + " (for " +
             std::to_string(static_cast<int>(seconds)) + " s): exiting with code " +
             std::to_string(kExitPreempted) + " before training, with nothing to checkpoint yet";
    }
  return std::move(walk->message);
}

}  // namespace

data::FolderLister rank0_folder_lister(ProcessGroup& group) {
  return [&group](const std::string& root, bool may_be_absent) {
    std::string message;
    if (group.rank() == 0) message = list_unless_preempted(root, may_be_absent);
    message = group.broadcast_from_rank0(std::move(message), "the listing of " + root);
    if (!message.empty() && message[0] == kPreempted) throw PreemptedAtStart(message.substr(1));
    if (message.empty() || message[0] != kListing)
      throw ddp::AllRanksError(message.empty() ? "rank 0 sent no listing of " + root
                                                : message.substr(1));
    return data::decode_listing(message.substr(1));
  };
}

}  // namespace rddp
