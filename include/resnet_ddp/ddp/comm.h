#pragma once
// Collectives over the job's ranks, on host memory (MPI, for the CPU engine) or device memory
// (NCCL, for the CUDA engine), behind one interface, so the gradient reducer is written once.
// Every operation is nonblocking and returns a request; the blocking forms start one and
// synchronize it. Each operation carries a description ("allreduce of bucket 3 at step 120")
// that names it when the watchdog reports that it did not complete.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "resnet_ddp/engine.h"

namespace rddp::ddp {

class DistributedContext;
class Watchdog;

// bf16: bfloat16 as raw 2-byte bits (include/resnet_ddp/kernel_math/bf16.h); only Reduction::sum, whose every
// pairwise addition is done in float and rounded to bfloat16, as NCCL's ncclBfloat16 sum does.
enum class DataType { f32, f64, i64, u8, bf16 };
size_t size_of(DataType type);

// average is sum / world size. For floating types each rank's values are multiplied by
// 1/world size before the sum, as PyTorch DDP divides gradients when copying them into a
// bucket and as NCCL implements ncclAvg for floats, so both backends and PyTorch agree.
enum class Reduction { sum, average, min, max };
const char* to_string(Reduction op);

class CommRequest {
 public:
  virtual ~CommRequest() = default;
  // Progresses the operation (MPI moves nonblocking collectives only inside MPI calls) and
  // says whether it has completed. From the thread that started it.
  virtual bool test() = 0;
  // Orders the result before the engine's next work. Host memory: blocks until complete.
  // Device memory: the engine's compute stream waits for the comm stream; the host goes on.
  virtual void wait() = 0;
  // Blocks the host until the result is in memory.
  virtual void synchronize() = 0;
  // Whether the operation is known to have completed, from any thread (the watchdog's view).
  // MPI: once test() or wait() has seen it complete; NCCL: the comm stream has passed it.
  virtual bool observed_complete() const = 0;
};

class Comm {
 public:
  virtual ~Comm() = default;

  virtual const char* backend() const = 0;  // "mpi" or "nccl"
  virtual DeviceKind memory() const = 0;    // where buffers must live
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In place: `data` holds this rank's `count` values and receives the reduction.
  virtual std::shared_ptr<CommRequest> start_allreduce(void* data, size_t count, DataType type,
                                                       Reduction op, const std::string& what) = 0;
  // In place: `root`'s bytes reach every rank.
  virtual std::shared_ptr<CommRequest> start_broadcast(void* data, size_t bytes, int root,
                                                       const std::string& what) = 0;
  virtual std::shared_ptr<CommRequest> start_barrier(const std::string& what) = 0;

  // Device memory only: a request that completes when the engine's compute stream has passed
  // what is enqueued on it so far, handed to the watchdog as `what`. A replayed CUDA graph's
  // collectives are not requests of their own, so the graph's launch is watched this way.
  virtual std::shared_ptr<CommRequest> watch_compute(const std::string& what);

  void allreduce(void* data, size_t count, DataType type, Reduction op, const std::string& what) {
    start_allreduce(data, count, type, op, what)->synchronize();
  }
  void broadcast(void* data, size_t bytes, int root, const std::string& what) {
    start_broadcast(data, bytes, root, what)->synchronize();
  }
  void barrier(const std::string& what) { start_barrier(what)->synchronize(); }

  // An error the library found outside any call (NCCL's ncclCommGetAsyncError), or "" when
  // none. Any thread; the watchdog polls it.
  virtual std::string async_error() { return {}; }
  // Makes every operation in flight return so no thread stays blocked in it (ncclCommAbort).
  // The communicator is unusable afterwards. Any thread; the fatal path calls it.
  virtual void abort() {}
};

struct CommOptions {
  // Reports operations that do not complete in time; may be null. Must outlive the comm.
  Watchdog* watchdog = nullptr;
  // NCCL: the CUDA device of this rank and the engine's compute stream (a cudaStream_t).
  int device = 0;
  void* compute_stream = nullptr;
};

// MPI for DeviceKind::cpu, NCCL for DeviceKind::cuda, over all of the context's ranks.
std::unique_ptr<Comm> make_comm(DeviceKind memory, const DistributedContext& context,
                                const CommOptions& options);

}  // namespace rddp::ddp
