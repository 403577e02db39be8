// The emulator itself (README.md): shared memory, barriers and every warp intrinsic give the
// GPU's results, and what would hang, fault or go unnoticed on a GPU fails the launch with a
// message naming the kernel, instead of passing or hanging.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "launch_fault.h"
#include "probe_kernels.h"
#include "stream_work.h"
#include "thread_order.h"
#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/device_buffer.h"
#include "support/child_process.h"
#include "support/text_contains.h"

using rddp::cuda::DeviceBuffer;
using rddp::testing::contains;
using rddp::cuda::download;

namespace {

template <typename T>
DeviceBuffer<T> upload(const std::vector<T>& host) {
  DeviceBuffer<T> device(host.size());
  rddp::cuda::copy_to_device(device.get(), host.data(), host.size(), nullptr);
  return device;
}

// The message of the LaunchFault that `launch` throws, or "" when it throws none.
template <typename Launch>
std::string fault_of(Launch&& launch) {
  try {
    launch();
  } catch (const emu::LaunchFault& fault) {
    return fault.what();
  }
  return "";
}

// Runs the emulator in `order` for the life of the object, then in the order before.
class OrderFor {
 public:
  explicit OrderFor(emu::ThreadOrder order) : before_(emu::thread_order()) {
    emu::set_thread_order(order);
  }
  ~OrderFor() { emu::set_thread_order(before_); }
  OrderFor(const OrderFor&) = delete;
  OrderFor& operator=(const OrderFor&) = delete;

 private:
  emu::ThreadOrder before_;
};

std::vector<int> racy_neighbour_output(const std::vector<int>& in) {
  const auto d_in = upload(in);
  DeviceBuffer<int> d_out(in.size());
  emu_probe::racy_neighbour(d_in.get(), d_out.get());
  return download(d_out.get(), in.size(), nullptr);
}

}  // namespace

TEST_CASE("emulator: a shared-memory tree over several blocks") {
  std::vector<int> in(3 * 256);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>(i % 97);
  const auto d_in = upload(in);
  DeviceBuffer<int> d_out(3);
  emu_probe::block_sum(d_in.get(), d_out.get(), 3);
  const auto out = download(d_out.get(), 3, nullptr);
  for (int b = 0; b < 3; ++b) {
    int want = 0;
    for (int t = 0; t < 256; ++t) want += in[b * 256 + t];
    CHECK(out[b] == want);
  }
}

TEST_CASE("emulator: warp shuffles and ballots give the GPU's values") {
  DeviceBuffer<int> d_out(5 * 32);
  emu_probe::warp_intrinsics(d_out.get());
  const auto out = download(d_out.get(), 5 * 32, nullptr);
  for (int lane = 0; lane < 32; ++lane) {
    CAPTURE(lane);
    CHECK(out[5 * lane + 0] == 100 + (lane + 5 < 32 ? lane + 5 : lane));
    CHECK(out[5 * lane + 1] == 100 + (lane >= 2 ? lane - 2 : lane));
    CHECK(out[5 * lane + 2] == 100 + (lane ^ 16));
    CHECK(out[5 * lane + 3] == 103);
    CHECK(static_cast<unsigned>(out[5 * lane + 4]) == 0xaaaaaaaau);
  }
}

TEST_CASE("emulator: block-wide votes, and exited threads leave the barrier") {
  DeviceBuffer<int> votes(2);
  emu_probe::block_votes(votes.get());
  CHECK(download(votes.get(), 2, nullptr) == std::vector<int>{48, 1});
  DeviceBuffer<int> out(128);
  RDDP_CUDA_CHECK(cudaMemset(out.get(), 0, out.bytes()));
  emu_probe::early_exit(out.get());
  const auto got = download(out.get(), 128, nullptr);
  for (int t = 0; t < 128; ++t) CHECK(got[t] == (t < 32 ? 0 : 1));
}

TEST_CASE("emulator: a barrier not every thread reaches fails the launch") {
  DeviceBuffer<int> out(128);
  const std::string fault = fault_of([&] { emu_probe::divergent_barrier(out.get()); });
  CHECK(contains(fault, "divergent_barrier_kernel"));
  CHECK(contains(fault, "different barriers"));
  CHECK(contains(fault, "block (0,0,0)"));
}

TEST_CASE("emulator: a shuffle that waits for an exited lane fails the launch") {
  DeviceBuffer<int> out(32);
  const std::string fault = fault_of([&] { emu_probe::shuffle_after_exit(out.get()); });
  CHECK(contains(fault, "shuffle_after_exit_kernel"));
  CHECK(contains(fault, "lane 0, which has exited"));
}

TEST_CASE("emulator: threads that wait for each other fail the launch instead of hanging") {
  DeviceBuffer<int> out(64);
  const std::string fault = fault_of([&] { emu_probe::hang(out.get()); });
  CHECK(contains(fault, "hang_kernel"));
  CHECK(contains(fault, "no thread can go on"));
  CHECK(contains(fault, "at __syncwarp"));
  // The emulator is usable again after a failed launch.
  DeviceBuffer<int> votes(2);
  emu_probe::block_votes(votes.get());
  CHECK(download(votes.get(), 2, nullptr) == std::vector<int>{48, 1});
}

TEST_CASE("emulator: a race the forward order hides fails in the reverse order") {
  std::vector<int> first(64), second(64), shifted_first(64), shifted_second(64);
  for (int t = 0; t < 64; ++t) {
    first[t] = 1000 + t;
    second[t] = 2000 + t;
  }
  for (int t = 0; t < 64; ++t) {
    shifted_first[t] = first[t > 0 ? t - 1 : 0];
    shifted_second[t] = second[t > 0 ? t - 1 : 0];
  }
  {
    OrderFor forward(emu::ThreadOrder::forward);
    CHECK(racy_neighbour_output(first) == shifted_first);
  }
  OrderFor reverse(emu::ThreadOrder::reverse);
  const std::vector<int> out = racy_neighbour_output(second);
  // Thread t runs before t - 1 has stored: it reads what the last launch left there.
  CHECK(out[0] == second[0]);
  for (int t = 1; t < 64; ++t) CHECK(out[t] == first[t - 1]);
  CHECK(out != shifted_second);
}

TEST_CASE("emulator: in the reverse order a warp runs ahead and overwrites what another reads") {
  std::vector<int> in(64);
  int sums[2] = {0, 0};
  for (int t = 0; t < 64; ++t) {
    in[t] = t * t % 13 + 1;
    sums[t / 32] += in[t];
  }
  const int first = sums[0] + sums[1], second = 2 * first;
  const auto d_in = upload(in);
  DeviceBuffer<int> d_out(128);
  std::vector<int> expected(128, first);
  std::fill(expected.begin() + 64, expected.end(), second);
  {
    OrderFor forward(emu::ThreadOrder::forward);
    emu_probe::reused_partials(d_in.get(), d_out.get());
    CHECK(download(d_out.get(), 128, nullptr) == expected);
  }
  OrderFor reverse(emu::ThreadOrder::reverse);
  emu_probe::reused_partials(d_in.get(), d_out.get());
  const std::vector<int> out = download(d_out.get(), 128, nullptr);
  // Warp 1 ran first and stored its second partial before warp 0 loaded the first ones.
  for (int t = 0; t < 32; ++t) CHECK(out[t] == sums[0] + 2 * sums[1]);
  for (int t = 32; t < 64; ++t) CHECK(out[t] == first);
  for (int t = 64; t < 128; ++t) CHECK(out[t] == second);
}

TEST_CASE("emulator: the reverse order runs the blocks of a grid last to first") {
  DeviceBuffer<int> out(5);
  {
    OrderFor forward(emu::ThreadOrder::forward);
    RDDP_CUDA_CHECK(cudaMemset(out.get(), 0, out.bytes()));
    emu_probe::chained_blocks(out.get(), 5);
    CHECK(download(out.get(), 5, nullptr) == std::vector<int>{1, 2, 3, 4, 5});
  }
  OrderFor reverse(emu::ThreadOrder::reverse);
  RDDP_CUDA_CHECK(cudaMemset(out.get(), 0, out.bytes()));
  emu_probe::chained_blocks(out.get(), 5);
  CHECK(download(out.get(), 5, nullptr) == std::vector<int>{1, 1, 1, 1, 1});
}

TEST_CASE("emulator: a fault in the reverse order says so") {
  OrderFor reverse(emu::ThreadOrder::reverse);
  DeviceBuffer<int> out(64);
  const std::string fault = fault_of([&] { emu_probe::hang(out.get()); });
  CHECK(contains(fault, "hang_kernel"));
  CHECK(contains(fault, "threads and blocks in reverse order"));
  CHECK(contains(fault, "no thread can go on"));
}

TEST_CASE("emulator: a write past the end of a buffer fails the launch") {
  DeviceBuffer<int> out(100);
  const std::string fault = fault_of([&] { emu_probe::write_past_end(100, out.get()); });
  CHECK(contains(fault, "write_past_end_kernel"));
  CHECK(contains(fault, "wrote out of bounds: byte 400 of the buffer of 400 bytes"));
}

TEST_CASE("emulator: kernels may only be handed memory from cudaMalloc") {
  std::vector<int> host(100);
  const std::string fault = fault_of([&] { emu_probe::write_past_end(99, host.data()); });
  CHECK(contains(fault, "not in memory from cudaMalloc"));
}

TEST_CASE("emulator: a block of more than 1024 threads is a launch error, as on the GPU") {
  DeviceBuffer<int> out(2048);
  emu_probe::too_many_threads(out.get());
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("emulator: a vector load through a misaligned pointer stops the program") {
  DeviceBuffer<float> in(8), out(1);
  RDDP_CUDA_CHECK(cudaMemset(in.get(), 0, in.bytes()));
  emu_probe::vector_load(in.get(), out.get());  // 256-byte aligned: fine
  // One float in: a GPU faults (misaligned address); UBSan's alignment check ends the program,
  // so the launch runs in a child process whose report is read back.
  const rddp::testing::ChildResult child =
      rddp::testing::run_in_child([&] { emu_probe::vector_load(in.get() + 1, out.get()); });
  const std::string& report = child.output;
  const int status = child.status;
  CAPTURE(report);
  CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 0));
  CHECK(contains(report, "misaligned address"));
  CHECK(contains(report, "16 byte alignment"));
}

TEST_CASE("a captured stream records its work, a graph replays it, and a wait spoils a capture") {
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  DeviceBuffer<int> device(4);
  int* values = device.get();  // host memory under the emulator: readable without a copy
  std::vector<int> host{1, 2, 3, 4};
  REQUIRE(cudaMemsetAsync(values, 0, 4 * sizeof(int), stream) == cudaSuccess);

  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(values, host.data(), 4 * sizeof(int), cudaMemcpyHostToDevice, stream) ==
          cudaSuccess);
  REQUIRE(cudaMemsetAsync(values + 3, 0, sizeof(int), stream) == cudaSuccess);
  CHECK(values[0] == 0);  // recorded, not run
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  size_t nodes = 0;
  REQUIRE(cudaGraphGetNodes(graph, nullptr, &nodes) == cudaSuccess);
  CHECK(nodes == 2);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  // A replay reads the host buffer as it is then, as a graph's copy node does.
  host = {5, 6, 7, 8};
  REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
  CHECK(std::vector<int>(values, values + 4) == std::vector<int>{5, 6, 7, 0});
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);

  // Waiting for the GPU, allocating, or using the legacy stream during a capture is refused
  // and ends the capture without a graph.
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  CHECK(cudaStreamSynchronize(stream) == cudaErrorStreamCaptureUnsupported);
  CHECK(cudaStreamEndCapture(stream, &graph) == cudaErrorStreamCaptureInvalidated);
  CHECK(graph == nullptr);
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  void* more = nullptr;
  CHECK(cudaMalloc(&more, 16) == cudaErrorStreamCaptureUnsupported);
  CHECK(cudaStreamEndCapture(stream, &graph) == cudaErrorStreamCaptureInvalidated);
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  (void)cudaMemsetAsync(values, 0, sizeof(int), nullptr);
  CHECK(cudaStreamEndCapture(stream, &graph) == cudaErrorStreamCaptureInvalidated);
  CHECK(values[0] == 5);
  (void)cudaGetLastError();
  // After a spoiled capture the stream runs work again.
  REQUIRE(cudaMemsetAsync(values, 0, sizeof(int), stream) == cudaSuccess);
  CHECK(values[0] == 0);
  cudaStreamDestroy(stream);
}

namespace {

// Asynchronous work that completes when the test says so.
class Switch final : public emu::AsyncWork {
 public:
  bool test() override { return on; }
  std::atomic<bool> on{false};
};

}  // namespace

TEST_CASE("asynchronous work keeps its stream's later events and work behind it") {
  cudaStream_t comm = nullptr, compute = nullptr;
  REQUIRE(cudaStreamCreate(&comm) == cudaSuccess);
  REQUIRE(cudaStreamCreate(&compute) == cudaSuccess);
  cudaEvent_t before = nullptr, after = nullptr;
  REQUIRE(cudaEventCreate(&before) == cudaSuccess);
  REQUIRE(cudaEventCreate(&after) == cudaSuccess);
  REQUIRE(cudaEventRecord(before, comm) == cudaSuccess);
  auto work = std::make_shared<Switch>();
  REQUIRE(emu::enqueue_async(comm, [&] { return work; }) == cudaSuccess);
  REQUIRE(cudaEventRecord(after, comm) == cudaSuccess);
  CHECK(cudaEventQuery(before) == cudaSuccess);
  CHECK(cudaEventQuery(after) == cudaErrorNotReady);
  // Other streams' work runs at once.
  DeviceBuffer<int> device(1);
  REQUIRE(cudaMemsetAsync(device.get(), 0, sizeof(int), compute) == cudaSuccess);
  CHECK(device.get()[0] == 0);

  // Waits on the host end when the work completes, from another thread here.
  std::thread completer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    work->on = true;
  });
  CHECK(cudaStreamWaitEvent(compute, after, 0) == cudaSuccess);
  CHECK(work->on);
  completer.join();
  CHECK(cudaEventQuery(after) == cudaSuccess);

  // Work enqueued behind asynchronous work runs once it has completed.
  auto second = std::make_shared<Switch>();
  REQUIRE(emu::enqueue_async(comm, [&] { return second; }) == cudaSuccess);
  std::thread second_completer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    second->on = true;
  });
  REQUIRE(cudaMemsetAsync(device.get(), 1, sizeof(int), comm) == cudaSuccess);
  CHECK(second->on);
  CHECK(device.get()[0] == 0x01010101);
  second_completer.join();

  cudaEventDestroy(before);
  cudaEventDestroy(after);
  cudaStreamDestroy(compute);
  cudaStreamDestroy(comm);
}

TEST_CASE("a capture takes in the streams that wait on its events, and must join them back") {
  cudaStream_t compute = nullptr, comm = nullptr;
  REQUIRE(cudaStreamCreate(&compute) == cudaSuccess);
  REQUIRE(cudaStreamCreate(&comm) == cudaSuccess);
  cudaEvent_t fork = nullptr, join = nullptr, outside = nullptr;
  REQUIRE(cudaEventCreate(&fork) == cudaSuccess);
  REQUIRE(cudaEventCreate(&join) == cudaSuccess);
  REQUIRE(cudaEventCreate(&outside) == cudaSuccess);
  REQUIRE(cudaEventRecord(outside, comm) == cudaSuccess);
  DeviceBuffer<int> device(2);
  int* values = device.get();
  REQUIRE(cudaMemsetAsync(values, 0, 2 * sizeof(int), compute) == cudaSuccess);
  std::atomic<int> starts{0};
  auto done = std::make_shared<Switch>();
  done->on = true;

  // compute -> fork -> comm: a collective, then an event the compute stream waits on.
  REQUIRE(cudaStreamBeginCapture(compute, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(values, 1, sizeof(int), compute) == cudaSuccess);
  REQUIRE(cudaEventRecord(fork, compute) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(comm, fork, 0) == cudaSuccess);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  REQUIRE(cudaStreamIsCapturing(comm, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusActive);
  REQUIRE(emu::enqueue_async(comm, [&] { ++starts; return done; }) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(values + 1, 2, sizeof(int), comm) == cudaSuccess);
  REQUIRE(cudaEventRecord(join, comm) == cudaSuccess);
  // The host cannot wait for an event inside the capture: another thread (a watchdog) asking is
  // told so, and an event recorded outside the capture answers it as usual.
  cudaError_t other_thread = cudaSuccess;
  std::thread([&] { other_thread = cudaEventQuery(join); }).join();
  CHECK(other_thread == cudaErrorCapturedEvent);
  std::thread([&] { other_thread = cudaEventQuery(outside); }).join();
  CHECK(other_thread == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(compute, join, 0) == cudaSuccess);
  CHECK(starts == 0);
  CHECK(values[0] == 0);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(compute, &graph) == cudaSuccess);
  REQUIRE(cudaStreamIsCapturing(comm, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusNone);
  size_t nodes = 0;
  REQUIRE(cudaGraphGetNodes(graph, nullptr, &nodes) == cudaSuccess);
  CHECK(nodes == 3);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, compute) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, compute) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(compute) == cudaSuccess);
  CHECK(starts == 2);  // each replay starts the collective again
  CHECK(values[0] == 0x01010101);
  CHECK(values[1] == 0x02020202);

  // A replay with a collective is in flight on the launch stream until the collective completes
  // and its later nodes have run: the launch returns at once, as on the GPU, and an event
  // recorded after it is not ready meanwhile (what a watchdog sees of a rank that never joins).
  REQUIRE(cudaMemsetAsync(values, 0, 2 * sizeof(int), compute) == cudaSuccess);
  done = std::make_shared<Switch>();
  REQUIRE(cudaGraphLaunch(exec, compute) == cudaSuccess);
  REQUIRE(cudaEventRecord(join, compute) == cudaSuccess);
  for (int waited = 0; starts < 3 && waited < 10000; ++waited)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(starts == 3);
  CHECK(cudaEventQuery(join) == cudaErrorNotReady);
  CHECK(values[1] == 0);  // the node after the collective has not run
  // The host's work on another stream goes on meanwhile.
  cudaStream_t other = nullptr;
  REQUIRE(cudaStreamCreate(&other) == cudaSuccess);
  DeviceBuffer<int> elsewhere(1);
  REQUIRE(cudaMemsetAsync(elsewhere.get(), 0, sizeof(int), other) == cudaSuccess);
  CHECK(elsewhere.get()[0] == 0);
  done->on = true;
  REQUIRE(cudaEventSynchronize(join) == cudaSuccess);
  CHECK(values[0] == 0x01010101);
  CHECK(values[1] == 0x02020202);
  // The replay owns its nodes: the executable graph may go before a replay ends.
  done = std::make_shared<Switch>();
  REQUIRE(cudaGraphLaunch(exec, compute) == cudaSuccess);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  done->on = true;
  REQUIRE(cudaStreamSynchronize(compute) == cudaSuccess);
  CHECK(starts == 4);
  cudaStreamDestroy(other);

  // A fork whose work the capture never waits for fails the capture.
  REQUIRE(cudaStreamBeginCapture(compute, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  REQUIRE(cudaEventRecord(fork, compute) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(comm, fork, 0) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(values + 1, 3, sizeof(int), comm) == cudaSuccess);
  CHECK(cudaStreamEndCapture(compute, &graph) == cudaErrorStreamCaptureUnjoined);
  CHECK(graph == nullptr);
  CHECK(values[1] == 0x02020202);

  // A captured stream may not wait on an event recorded outside the capture.
  REQUIRE(cudaStreamBeginCapture(compute, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  CHECK(cudaStreamWaitEvent(compute, outside, 0) == cudaErrorStreamCaptureIsolation);
  CHECK(cudaStreamEndCapture(compute, &graph) == cudaErrorStreamCaptureInvalidated);
  (void)cudaGetLastError();

  // The capturing thread may not poll: that spoils the capture.
  REQUIRE(cudaStreamBeginCapture(compute, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  CHECK(cudaEventQuery(outside) == cudaErrorStreamCaptureUnsupported);
  CHECK(cudaStreamEndCapture(compute, &graph) == cudaErrorStreamCaptureInvalidated);
  (void)cudaGetLastError();

  // The streams run work again at once.
  REQUIRE(cudaMemsetAsync(values + 1, 0, sizeof(int), comm) == cudaSuccess);
  CHECK(values[1] == 0);
  for (cudaEvent_t event : {fork, join, outside}) cudaEventDestroy(event);
  cudaStreamDestroy(comm);
  cudaStreamDestroy(compute);
}

TEST_CASE("every emulated GPU has its own PCI bus id") {
  int count = 0;
  REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  CHECK(count >= 1);
  char first[32] = {}, last[32] = {};
  REQUIRE(cudaDeviceGetPCIBusId(first, sizeof first, 0) == cudaSuccess);
  REQUIRE(cudaDeviceGetPCIBusId(last, sizeof last, count - 1) == cudaSuccess);
  CHECK(std::string(first) == "0000:01:00.0");
  CHECK((count == 1) == (std::string(first) == last));
  CHECK(cudaSetDevice(count) == cudaErrorInvalidDevice);
  (void)cudaGetLastError();
  int current = -1;
  REQUIRE(cudaSetDevice(count - 1) == cudaSuccess);
  REQUIRE(cudaGetDevice(&current) == cudaSuccess);
  CHECK(current == count - 1);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
}

TEST_CASE("an external event recorded in a capture is a node that each replay records") {
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  cudaEvent_t launched = nullptr, inside = nullptr, ended = nullptr;
  for (cudaEvent_t* event : {&launched, &inside, &ended})
    REQUIRE(cudaEventCreate(event) == cudaSuccess);
  DeviceBuffer<int> device(1);
  auto done = std::make_shared<Switch>();
  done->on = true;

  // memset, [inside], collective, memset: the collective makes the replay asynchronous.
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(device.get(), 1, sizeof(int), stream) == cudaSuccess);
  REQUIRE(cudaEventRecordWithFlags(inside, stream, cudaEventRecordExternal) == cudaSuccess);
  REQUIRE(emu::enqueue_async(stream, [&] { return done; }) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(device.get(), 2, sizeof(int), stream) == cudaSuccess);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  size_t nodes = 0;
  REQUIRE(cudaGraphGetNodes(graph, nullptr, &nodes) == cudaSuccess);
  CHECK(nodes == 4);
  CHECK(cudaEventRecordWithFlags(inside, stream, 7u) == cudaErrorInvalidValue);
  // Captured but never replayed, it has no time yet.
  float never = 0;
  CHECK(cudaEventElapsedTime(&never, inside, inside) == cudaErrorInvalidResourceHandle);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);

  // The collective completes 30 ms into the replay: the event after the launch times the
  // replay's end, the node inside it a point before the collective.
  done = std::make_shared<Switch>();
  REQUIRE(cudaEventRecord(launched, stream) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
  REQUIRE(cudaEventRecord(ended, stream) == cudaSuccess);
  float ms = -1;
  CHECK(cudaEventElapsedTime(&ms, launched, ended) == cudaErrorNotReady);
  std::thread completer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    done->on = true;
  });
  REQUIRE(cudaEventSynchronize(ended) == cudaSuccess);
  completer.join();
  CHECK(device.get()[0] == 0x02020202);
  float to_inside = -1, inside_to_end = -1;
  REQUIRE(cudaEventElapsedTime(&ms, launched, ended) == cudaSuccess);
  REQUIRE(cudaEventElapsedTime(&to_inside, launched, inside) == cudaSuccess);
  REQUIRE(cudaEventElapsedTime(&inside_to_end, inside, ended) == cudaSuccess);
  CHECK(ms >= 30);
  CHECK(to_inside >= 0);
  CHECK(to_inside < 30);
  CHECK(inside_to_end >= 25);
  CHECK(to_inside + inside_to_end == doctest::Approx(ms).epsilon(0.01));

  // The next replay records it again.
  float first_replay = 0;
  REQUIRE(cudaEventElapsedTime(&first_replay, launched, inside) == cudaSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  done->on = true;
  REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  REQUIRE(cudaEventElapsedTime(&ms, launched, inside) == cudaSuccess);
  CHECK(ms > first_replay + 4);

  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  for (cudaEvent_t event : {launched, inside, ended}) cudaEventDestroy(event);
  cudaStreamDestroy(stream);
}
