// Nonblocking MPI collectives on host buffers.
#include "resnet_ddp/ddp/mpi_comm.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <exception>
#include <vector>

#include "resnet_ddp/ddp/bf16_gradients.h"
#include "resnet_ddp/ddp/context.h"
#include "resnet_ddp/ddp/mpi_check.h"
#include "resnet_ddp/ddp/watchdog.h"
#include "resnet_ddp/error.h"

namespace rddp::ddp {

namespace {

MPI_Op mpi_op(Reduction op) {
  switch (op) {
    case Reduction::sum:
    case Reduction::average: return MPI_SUM;  // average: the inputs are scaled first
    case Reduction::min: return MPI_MIN;
    case Reduction::max: return MPI_MAX;
  }
  RDDP_ASSERT(false);
  return MPI_OP_NULL;
}

// MPI has no bfloat16: it travels as an opaque 2-byte type, summed by a user operation that
// rounds each pairwise sum to bfloat16, as NCCL's bfloat16 sum does. MPI calls it with blocks
// of our own type only, since the communicator never hands it any other.
void sum_bf16(void* in, void* inout, int* count, MPI_Datatype*) {
  accumulate_bf16(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(inout), static_cast<size_t>(*count));
}

template <typename T>
void scale(void* data, size_t count, T factor) {
  T* values = static_cast<T*>(data);
  for (size_t i = 0; i < count; ++i) values[i] *= factor;
}

// MPI counts are int: larger operations are split into chunks, each its own collective. An
// empty operation is still one collective, so every rank takes part in the same calls.
constexpr size_t kMaxChunk = static_cast<size_t>(INT_MAX) / 64 * 64;

template <typename StartChunk>
void for_each_chunk(size_t count, StartChunk start_chunk) {
  const size_t chunks = std::max<size_t>(1, (count + kMaxChunk - 1) / kMaxChunk);
  for (size_t i = 0; i < chunks; ++i) {
    const size_t first = i * kMaxChunk;
    start_chunk(first, static_cast<int>(std::min(kMaxChunk, count - first)));
  }
}

class MpiRequest final : public CommRequest {
 public:
  std::vector<MPI_Request> parts;

  bool test() override {
    if (complete_.load()) return true;
    int flag = 0;
    RDDP_MPI_CHECK(MPI_Testall(static_cast<int>(parts.size()), parts.data(), &flag, MPI_STATUSES_IGNORE));
    if (flag) complete_.store(true);
    return flag != 0;
  }
  void wait() override {
    if (complete_.load()) return;
    RDDP_MPI_CHECK(MPI_Waitall(static_cast<int>(parts.size()), parts.data(), MPI_STATUSES_IGNORE));
    complete_.store(true);
  }
  void synchronize() override { wait(); }
  bool observed_complete() const override { return complete_.load(); }

 private:
  std::atomic<bool> complete_{false};
};

class MpiComm final : public Comm {
 public:
  MpiComm(const DistributedContext& context, Watchdog* watchdog) : watchdog_(watchdog) {
    RDDP_MPI_CHECK(MPI_Comm_dup(context.world(), &comm_));
    RDDP_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    RDDP_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    RDDP_MPI_CHECK(MPI_Comm_size(comm_, &size_));
    RDDP_MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &bf16_type_));
    RDDP_MPI_CHECK(MPI_Type_commit(&bf16_type_));
    // Commutative, like MPI_SUM on floats: a + b and b + a round to the same bfloat16. Neither
    // is associative, so, as for floats, every rank gets the same bits only because MPI's
    // allreduce hands every rank one result.
    RDDP_MPI_CHECK(MPI_Op_create(&sum_bf16, 1, &bf16_sum_));
  }
  ~MpiComm() override {
    // During stack unwinding the job is about to be aborted; leave MPI alone until then.
    if (std::uncaught_exceptions() == 0) {
      MPI_Op_free(&bf16_sum_);
      MPI_Type_free(&bf16_type_);
      MPI_Comm_free(&comm_);
    }
  }

  const char* backend() const override { return "mpi"; }
  DeviceKind memory() const override { return DeviceKind::cpu; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::shared_ptr<CommRequest> start_allreduce(void* data, size_t count, DataType type, Reduction op,
                                               const std::string& what) override {
    if (op == Reduction::average) {
      // Each rank's share first, as PyTorch DDP and NCCL's ncclAvg for floats do.
      if (type == DataType::f32) scale(data, count, static_cast<float>(1.0 / size_));
      else if (type == DataType::f64) scale(data, count, 1.0 / size_);
      else fail("internal error: an average of ", what, " needs float32 or float64 values");
    }
    if (type == DataType::bf16 && op != Reduction::sum)
      fail("internal error: ", what, " asks for a ", to_string(op), " of bfloat16 values; only the sum is offered");
    auto request = std::make_shared<MpiRequest>();
    const size_t element = size_of(type);
    for_each_chunk(count, [&](size_t first, int chunk) {
      request->parts.push_back(MPI_REQUEST_NULL);
      RDDP_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, static_cast<char*>(data) + first * element, chunk,
                                    mpi_type(type), type == DataType::bf16 ? bf16_sum_ : mpi_op(op), comm_,
                                    &request->parts.back()));
    });
    return watched(what, request);
  }

  std::shared_ptr<CommRequest> start_broadcast(void* data, size_t bytes, int root,
                                               const std::string& what) override {
    if (root < 0 || root >= size_) fail("internal error: broadcast of ", what, " from rank ", root, " of ", size_);
    auto request = std::make_shared<MpiRequest>();
    for_each_chunk(bytes, [&](size_t first, int chunk) {
      request->parts.push_back(MPI_REQUEST_NULL);
      RDDP_MPI_CHECK(MPI_Ibcast(static_cast<char*>(data) + first, chunk, MPI_BYTE, root, comm_,
                                &request->parts.back()));
    });
    return watched(what, request);
  }

  std::shared_ptr<CommRequest> start_barrier(const std::string& what) override {
    auto request = std::make_shared<MpiRequest>();
    request->parts.push_back(MPI_REQUEST_NULL);
    RDDP_MPI_CHECK(MPI_Ibarrier(comm_, &request->parts.back()));
    return watched(what, request);
  }

 private:
  MPI_Datatype mpi_type(DataType type) const {
    switch (type) {
      case DataType::f32: return MPI_FLOAT;
      case DataType::f64: return MPI_DOUBLE;
      case DataType::i64: return MPI_INT64_T;
      case DataType::u8: return MPI_UINT8_T;
      case DataType::bf16: return bf16_type_;
    }
    RDDP_ASSERT(false);
    return MPI_DATATYPE_NULL;
  }

  std::shared_ptr<CommRequest> watched(const std::string& what, std::shared_ptr<MpiRequest> request) {
    if (watchdog_) watchdog_->watch(what, request);
    return request;
  }

  Watchdog* watchdog_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Datatype bf16_type_ = MPI_DATATYPE_NULL;
  MPI_Op bf16_sum_ = MPI_OP_NULL;
  int rank_ = 0, size_ = 1;
};

}  // namespace

std::unique_ptr<Comm> make_mpi_comm(const DistributedContext& context, Watchdog* watchdog) {
  return std::make_unique<MpiComm>(context, watchdog);
}

}  // namespace rddp::ddp
