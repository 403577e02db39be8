// Data-parallel training on the CPU across the ranks of an MPI job (or one process with no
// launcher): the bootstrap, the MPI communicator, the reducer's averaging and ordering, the
// exact relation to a single process, and the host collectives. Run as
//   mpiexec -np N ddp_cpu_test --expect-world N     or     ddp_cpu_test --expect-world 1
#include <omp.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mpi_test_support.h"
#include "resnet_ddp/cpu/executor.h"
#include "resnet_ddp/cpu/softmax_xent.h"
#include "resnet_ddp/ddp/comm.h"
#include "resnet_ddp/ddp/context.h"
#include "resnet_ddp/ddp/fatal.h"
#include "resnet_ddp/ddp/host_collectives.h"
#include "resnet_ddp/ddp/reducer.h"
#include "resnet_ddp/ddp/thread_budget.h"
#include "resnet_ddp/ddp/watchdog.h"
#include "resnet_ddp/model_state.h"
#include "resnet_ddp/train/process_group.h"
#include "resnet_ddp/train/shared_folder_listing.h"

using namespace rddp;
using namespace rddp::ddp;
using namespace rddp::mpi_test;

namespace {

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", value);
  return text;
}

void test_context(const DistributedContext& context, int expected_world, RankChecks& checks) {
  checks.note_once(context.describe());
  checks.check(context.world_size() == expected_world,
               "world size " + std::to_string(context.world_size()) + " is the number of processes started, " +
                   std::to_string(expected_world));
  checks.check(context.rank() >= 0 && context.rank() < context.world_size(), "rank within the world");
  checks.check(context.local_rank() >= 0 && context.local_rank() < context.local_size() &&
                   context.local_size() <= context.world_size(),
               "local rank within the node's ranks");
  checks.check(context.thread_level() == MPI_THREAD_MULTIPLE, "MPI gives MPI_THREAD_MULTIPLE to the watchdog");
  checks.check(context.prefix() == "[rank " + std::to_string(context.rank()) + "/" +
                                       std::to_string(context.world_size()) + " " + context.host() + "]",
               "rank prefix names rank, world size and host: " + context.prefix());
  checks.check(omp_get_max_threads() == context.openmp_threads(), "OpenMP runs the threads the context chose");

  // Unless OMP_NUM_THREADS was set, the ranks of a node start no more threads together than
  // the CPUs they may run on (or one each, when there are more ranks than CPUs).
  const char* set = std::getenv("OMP_NUM_THREADS");
  if (set == nullptr || *set == '\0') {
    const CpuMask mine = current_affinity();
    std::vector<uint64_t> all(mine.size() * static_cast<size_t>(context.local_size()));
    RDDP_MPI_CHECK(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_UINT64_T, all.data(),
                                 static_cast<int>(mine.size()), MPI_UINT64_T, context.node()));
    CpuMask node_cpus(mine.size(), 0);
    for (size_t i = 0; i < all.size(); ++i) node_cpus[i % mine.size()] |= all[i];
    int threads = context.openmp_threads();
    RDDP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &threads, 1, MPI_INT, MPI_SUM, context.node()));
    checks.check(threads <= std::max(count_cpus(node_cpus), context.local_size()),
                 "the node's ranks run " + std::to_string(threads) + " OpenMP threads on " +
                     std::to_string(count_cpus(node_cpus)) + " CPUs");
  }
}

void test_collectives(const DistributedContext& context, Comm& comm, RankChecks& checks) {
  const int rank = context.rank(), world = context.world_size();
  checks.check(comm.rank() == rank && comm.size() == world, "the communicator spans the world");

  // Values small enough that every sum is exact in float.
  std::vector<float> floats(1000);
  for (size_t i = 0; i < floats.size(); ++i) floats[i] = static_cast<float>((rank + 1) * i) * 0.25f;
  comm.allreduce(floats.data(), floats.size(), DataType::f32, Reduction::sum, "test sum");
  bool sums = true;
  for (size_t i = 0; i < floats.size(); ++i)
    sums &= floats[i] == static_cast<float>(i * 0.25 * world * (world + 1) / 2);
  checks.check(sums, "allreduce sum of f32");

  double average = rank + 1.0;
  comm.allreduce(&average, 1, DataType::f64, Reduction::average, "test average");
  checks.check(std::fabs(average - (world + 1) / 2.0) < 1e-12, "allreduce average of f64");

  int64_t extremes[2] = {rank * 7 - 3, rank * 7 - 3};
  auto low = comm.start_allreduce(&extremes[0], 1, DataType::i64, Reduction::min, "test min");
  auto high = comm.start_allreduce(&extremes[1], 1, DataType::i64, Reduction::max, "test max");
  // Nonblocking: completed in the opposite order, and test() eventually says so.
  while (!high->test()) {
  }
  low->wait();
  checks.check(low->observed_complete() && high->observed_complete(), "requests report their completion");
  checks.check(extremes[0] == -3 && extremes[1] == (world - 1) * 7 - 3, "allreduce min and max of i64");

  std::vector<unsigned char> bytes(333, static_cast<unsigned char>(rank));
  comm.broadcast(bytes.data(), bytes.size(), world - 1, "test broadcast");
  bool from_last = true;
  for (unsigned char byte : bytes) from_last &= byte == world - 1;
  checks.check(from_last, "broadcast from the last rank");
  comm.barrier("test barrier");
}

// Passes everything on to the reducer, keeping a copy of this rank's own gradient of each
// tensor as it is reported (before its bucket is averaged in place) and the averaged
// gradients the optimizer is about to read.
class CapturingHooks final : public StepHooks {
 public:
  CapturingHooks(Reducer& reducer, Engine& engine)
      : reducer_(reducer), engine_(engine), local(engine.layout().parameter_elements(), 0.0f) {}
  void before_forward() override { reducer_.before_forward(); }
  void grad_ready(const TensorInfo& tensor) override {
    std::copy_n(engine_.grads() + tensor.offset, tensor.numel, local.begin() + static_cast<long>(tensor.offset));
    reducer_.grad_ready(tensor);
  }
  void before_optimizer() override {
    reducer_.before_optimizer();
    reduced.assign(engine_.grads(), engine_.grads() + engine_.layout().parameter_elements());
  }

 private:
  Reducer& reducer_;
  Engine& engine_;

 public:
  std::vector<float> local, reduced;
};

std::vector<float> params_of(Engine& engine) {
  return std::vector<float>(engine.params(), engine.params() + engine.layout().parameter_elements());
}
std::vector<float> running_of(Engine& engine) {
  return std::vector<float>(engine.running_stats(), engine.running_stats() + engine.layout().running_stat_elements());
}

// Relative to the value, with values near zero compared absolutely at the 1e-3 scale.
double worst_relative_difference(const std::vector<float>& actual, const std::vector<float>& expected) {
  double worst = actual.size() == expected.size() ? 0 : INFINITY;
  for (size_t i = 0; i < actual.size() && i < expected.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(actual[i]) - expected[i]) / (1e-3 + std::fabs(expected[i])));
  return worst;
}

ReducerOptions small_buckets(Timeline* timeline) {
  ReducerOptions options;
  options.first_bucket_mb = 0.002;  // about 500 floats: a few buckets for the narrow model
  options.bucket_mb = 0.008;
  options.first_step = 1;
  options.timeline = timeline;
  return options;
}

void check_launch_order(const Timeline& timeline, const Reducer& reducer, Engine& engine, RankChecks& checks);

void test_reduced_gradients(const DistributedContext& context, Comm& comm, RankChecks& checks) {
  const EngineConfig config = narrow_config();
  const int rank = context.rank(), world = context.world_size();
  // Each rank starts from its own initialisation: the reducer must replace it with rank 0's.
  auto engine = make_cpu_engine(config, 100 + static_cast<uint64_t>(rank));
  Timeline timeline;
  Reducer reducer(comm, *engine, small_buckets(&timeline));
  checks.note_once("reducer: " + reducer.describe());
  auto rank0_engine = make_cpu_engine(config, 100);
  checks.check(params_of(*engine) == params_of(*rank0_engine), "after construction every rank has rank 0's parameters");
  checks.check(same_on_every_rank(context, running_of(*engine)), "after construction the running statistics agree");

  CapturingHooks hooks(reducer, *engine);
  engine->train_step(rank_batch(config, rank, 1).view(), config.optimizer.lr, &hooks);

  // The mean of every rank's own gradients, in double, against the averaged float gradients.
  const std::vector<float> all_local = allgather(context, hooks.local);
  const size_t n = hooks.local.size();
  size_t bad = 0;
  double worst = 0;
  bool differs_from_local = false;
  for (size_t i = 0; i < n; ++i) {
    double sum = 0, magnitude = 0;
    for (int r = 0; r < world; ++r) {
      sum += all_local[r * n + i];
      magnitude += std::fabs(all_local[r * n + i]);
    }
    const double error = std::fabs(hooks.reduced[i] - sum / world);
    // Each rank's share and each partial sum are rounded once to float.
    if (error > 1e-6 * magnitude) ++bad;
    worst = std::max(worst, magnitude > 0 ? error / magnitude : error);
    differs_from_local |= hooks.reduced[i] != hooks.local[i];
  }
  checks.check(bad == 0, "averaged gradients equal the mean of the ranks' own gradients (" + std::to_string(bad) +
                             " of " + std::to_string(n) + " off; worst relative error " + number(worst) + ")");
  if (world > 1)
    checks.check(differs_from_local, "the ranks' own gradients differ, so the average is not trivially one of them");
  checks.check(same_on_every_rank(context, hooks.reduced), "averaged gradients are bit-identical on every rank");
  checks.check(same_on_every_rank(context, params_of(*engine)), "after the step the parameters are bit-identical");
  reducer.sync_buffers();
  checks.check(same_on_every_rank(context, running_of(*engine)),
               "after sync_buffers every rank has rank 0's running statistics");

  check_launch_order(timeline, reducer, *engine, checks);
  if (rank == 0) {
    std::printf("%s timeline of step 1:\n%s", context.prefix().c_str(), timeline.format().c_str());
    std::fflush(stdout);
  }
}

// Buckets were launched in order, each right after its last gradient, and the first ones
// while backward still had gradients to produce.
void check_launch_order(const Timeline& timeline, const Reducer& reducer, Engine& engine, RankChecks& checks) {
  const auto& tensors = engine.layout().tensors();
  const auto& events = timeline.events();
  int expected_bucket = 0;
  bool after_last_tensor = true;
  size_t first_launch = events.size(), last_ready = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].kind == TimelineEvent::Kind::grad_ready) last_ready = i;
    if (events[i].kind != TimelineEvent::Kind::bucket_launched) continue;
    first_launch = std::min(first_launch, i);
    after_last_tensor &= events[i].bucket == expected_bucket &&
                         events[i].tensor == tensors[reducer.plan().buckets[expected_bucket].tensors.back()].name &&
                         events[i - 1].kind == TimelineEvent::Kind::grad_ready;
    ++expected_bucket;
  }
  checks.check(expected_bucket == static_cast<int>(reducer.plan().buckets.size()) && after_last_tensor,
               "every bucket was launched in order right after its last gradient");
  checks.check(reducer.plan().buckets.size() >= 3 && first_launch < last_ready,
               "bucket 0 was launched before the last gradient was ready (" +
                   std::to_string(reducer.plan().buckets.size()) + " buckets)");
}

// --grad-allreduce bf16: the same step with gradients sent and summed as bfloat16.
//
// Error bound. Rank r contributes c_r = bf16(bf16(g_r) * s), s = fl(1/W): two roundings of
// relative size at most u = 2^-8 (bfloat16 keeps 8 significant bits, 7 stored and 1 implied:
// half an ulp approaches 2^-8 of the value just above a power of two; 2^-9 is the
// figure for values just below the next one, too tight as a bound), and s itself is 1/W
// within 2^-24. The sum adds the W shares in some
// order, rounding each of the W-1 partial sums to bfloat16: relative u again, on a partial sum
// no larger than sum_r |c_r|. Widening back to float is exact. So, with m = sum_r |g_r| / W,
//   |result - mean| <= m * ((1+u)^(W+1) * (1 + 2^-24) - 1)  (+ an absolute term for values
// so small that bfloat16 rounds them as subnormals: at most half of 2^-133 per rounding).
// That is W+1 roundings of relative 2^-8 each (one fewer when W is a power of two, whose
// scaling is exact), about (W+1)/256 of m: 1.2% for W = 2. The mean is computed in double from
// every rank's own float gradients.
void test_bf16_reduced_gradients(const DistributedContext& context, Comm& comm, RankChecks& checks) {
  const EngineConfig config = narrow_config();
  const int rank = context.rank(), world = context.world_size();
  auto engine = make_cpu_engine(config, 100 + static_cast<uint64_t>(rank));
  Timeline timeline;
  ReducerOptions options = small_buckets(&timeline);
  options.grad_allreduce = GradAllreduce::bf16;
  Reducer reducer(comm, *engine, options);
  checks.note_once("reducer: " + reducer.describe());

  CapturingHooks hooks(reducer, *engine);
  engine->train_step(rank_batch(config, rank, 1).view(), config.optimizer.lr, &hooks);

  const std::vector<float> all_local = allgather(context, hooks.local);
  const size_t n = hooks.local.size();
  const double u = std::ldexp(1.0, -8);
  const double relative_bound = std::pow(1 + u, world + 1) * (1 + std::ldexp(1.0, -24)) - 1;
  const double absolute_bound = (world + 1) * std::ldexp(1.0, -134);
  size_t bad = 0, not_bf16 = 0, rounded = 0;
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    double sum = 0, magnitude = 0;
    for (int r = 0; r < world; ++r) {
      sum += all_local[r * n + i];
      magnitude += std::fabs(all_local[r * n + i]);
    }
    const double mean = sum / world, m = magnitude / world;
    const double error = std::fabs(hooks.reduced[i] - mean);
    if (error > relative_bound * m + absolute_bound) ++bad;
    if (m > 0) worst = std::max(worst, error / m);
    uint32_t bits;
    std::memcpy(&bits, &hooks.reduced[i], sizeof bits);
    not_bf16 += (bits & 0xFFFFu) != 0;
    rounded += static_cast<float>(mean) != hooks.reduced[i];
  }
  checks.check(bad == 0, "bf16-averaged gradients are within (1+2^-8)^(W+1)-1 = " + number(relative_bound) +
                             " of the mean of |g| of the exact mean (" + std::to_string(bad) + " of " +
                             std::to_string(n) + " off; worst " + number(worst) + " of the mean of |g|)");
  checks.check(not_bf16 == 0, "every averaged gradient is a bfloat16 value (" + std::to_string(not_bf16) +
                                  " are not): they travelled as bfloat16");
  checks.check(rounded > 0, std::to_string(rounded) + " of " + std::to_string(n) +
                                " averaged gradients differ from the float mean: the rounding is visible");
  checks.check(same_on_every_rank(context, hooks.reduced), "bf16-averaged gradients are bit-identical on every rank");
  checks.check(same_on_every_rank(context, params_of(*engine)),
               "after the bf16 step the parameters are bit-identical on every rank");
  check_launch_order(timeline, reducer, *engine, checks);

  // What each rank hands MPI per step, from the timeline's launch records, against the same
  // step in float32.
  Timeline fp32_timeline;
  auto fp32_engine = make_cpu_engine(config, 100);
  Reducer fp32_reducer(comm, *fp32_engine, small_buckets(&fp32_timeline));
  fp32_engine->train_step(rank_batch(config, rank, 1).view(), config.optimizer.lr, &fp32_reducer);
  const size_t bf16_bytes = timeline.bytes_launched(1), fp32_bytes = fp32_timeline.bytes_launched(1);
  checks.note_once("allreduce bytes per step and rank: fp32 " + std::to_string(fp32_bytes) + ", bf16 " +
                   std::to_string(bf16_bytes));
  checks.check(bf16_bytes * 2 == fp32_bytes && fp32_bytes == n * sizeof(float),
               "bf16 hands the allreduce half the bytes of fp32 per step");
}

// The exact relation between W ranks and one process. With BatchNorm, W ranks of batch B are
// not one rank of batch W*B: each rank normalises with its own batch's statistics. What DDP
// computes is one process that, each step, (1) runs each rank's batch through the network
// separately, each forward starting from rank 0's running statistics (broadcast_buffers), and
// keeps the running statistics rank 0's batch produced; (2) averages the W gradients, each
// scaled by 1/W and summed, as the reducer does; (3) takes one optimizer step. With 1 or 2
// ranks the float sums are the same in any order, so the parameters must agree to the bit;
// with more, MPI's summation order is its own and they agree to rounding.
void test_single_process_relation(const DistributedContext& context, Comm& comm, RankChecks& checks) {
  EngineConfig config = narrow_config();
  config.optimizer.kind = OptimizerKind::sgd;
  config.optimizer.momentum = 0.9;
  config.optimizer.weight_decay = 1e-4;
  const int rank = context.rank(), world = context.world_size();
  const double lrs[] = {0.01, 0.004, 0.02};

  auto engine = make_cpu_engine(config, 300 + static_cast<uint64_t>(rank));
  Reducer reducer(comm, *engine, small_buckets(nullptr));
  for (int step = 1; step <= 3; ++step)
    engine->train_step(rank_batch(config, rank, 10 + step).view(), lrs[step - 1], &reducer);

  ModelState<float> reference(config.spec);
  init_torchvision(reference, 300);
  cpu::Executor<float> executor(reference, config.max_batch, config.height, config.width);
  CpuOptimizer<float> optimizer(config.optimizer, reference.layout.parameter_elements());
  std::vector<float> dlogits(static_cast<size_t>(config.max_batch) * config.spec.num_classes);
  const float share = static_cast<float>(1.0 / world);
  std::vector<std::vector<float>> running_after_rank(static_cast<size_t>(world));
  for (int step = 1; step <= 3; ++step) {
    const std::vector<float> running_before = reference.running;
    std::vector<float> average(reference.grads.size(), 0.0f);
    for (int r = 0; r < world; ++r) {
      reference.running = running_before;
      const Batch batch = rank_batch(config, r, 10 + step);
      const float* logits = executor.forward(batch.images.data(), config.max_batch, true);
      cpu::softmax_cross_entropy(logits, batch.labels.data(), config.max_batch, config.spec.num_classes, 0.0f,
                                 dlogits.data());
      executor.backward(dlogits.data());
      for (size_t i = 0; i < average.size(); ++i) average[i] += reference.grads[i] * share;
      running_after_rank[r] = reference.running;
    }
    reference.running = running_after_rank[0];
    optimizer.step(reference.params.data(), average.data(), lrs[step - 1]);
  }

  const double worst = worst_relative_difference(params_of(*engine), reference.params);
  // Each rank's own statistics: rank 0's of the step before, updated by its own last batch.
  const double worst_running = worst_relative_difference(running_of(*engine), running_after_rank[rank]);
  if (world <= 2) {
    checks.check(worst == 0, "after 3 steps the parameters equal the single-process reference bit for bit "
                             "(worst relative difference " + number(worst) + ")");
    checks.check(worst_running == 0, "each rank's running statistics are rank 0's of step 2 updated by its own "
                                     "batch, bit for bit (worst relative difference " + number(worst_running) + ")");
  } else {
    // A 1e-7 relative change of the averaging factor moves this small network's parameters by
    // about 1e-5 after 3 steps: the margin is a hundred times that.
    checks.check(worst < 1e-3, "after 3 steps the parameters equal the single-process reference to rounding "
                               "(worst relative difference " + number(worst) + ")");
    checks.check(worst_running < 1e-3, "each rank's running statistics are rank 0's of step 2 updated by its own "
                                       "batch, to rounding (worst relative difference " + number(worst_running) + ")");
  }
}

void test_host_collectives(const DistributedContext& context, Comm& comm, RankChecks& checks) {
  const int rank = context.rank(), world = context.world_size();
  Metrics local;
  local.loss_sum = 0.5 + rank;
  local.correct = 3 * rank;
  local.correct_top5 = 5 * rank + 1;
  local.count = 10 + rank;
  const Metrics total = reduce_metrics(comm, local);
  const int64_t rank_sum = static_cast<int64_t>(world) * (world - 1) / 2;
  checks.check(total.loss_sum == 0.5 * world + static_cast<double>(rank_sum) && total.correct == 3 * rank_sum &&
                   total.correct_top5 == 5 * rank_sum + world && total.count == 10 * world + rank_sum,
               "metrics are summed over the ranks");

  checks.check(any_rank(comm, rank == world - 1, "test any") && !any_rank(comm, false, "test none"),
               "any_rank is true when one rank's flag is");

  // Rank r holds 0.25 * (r % 2): the largest is held by rank 1 and the later odd ranks.
  const RankMaximum odd = max_over_ranks(comm, 0.25 * (rank % 2), "test share");
  checks.check(odd.value == (world > 1 ? 0.25 : 0.0) && odd.rank == (world > 1 ? 1 : 0),
               "max_over_ranks gives the largest value and the lowest rank holding it");
  const RankMaximum last_rank = max_over_ranks(comm, rank == world - 1 ? 0.5 : 0.1, "test share");
  checks.check(last_rank.value == 0.5 && last_rank.rank == world - 1,
               "max_over_ranks names the one rank with the largest value");

  bool equal_accepted = true;
  try {
    require_same(comm, 17, "training steps per epoch");
  } catch (const Error&) {
    equal_accepted = false;
  }
  checks.check(equal_accepted, "require_same accepts equal values");

  const RankDisagreement none = ranks_differing_from_rank0(comm, 0xfeedULL, "test fingerprint");
  checks.check(none.ranks == 0 && none.first == -1 && none.rank0_value == 0xfeedULL,
               "ranks_differing_from_rank0: none when every rank holds rank 0's value");
  // The last rank, then every rank but 0, holds another value.
  const RankDisagreement last =
      ranks_differing_from_rank0(comm, rank == world - 1 && world > 1 ? 7 : 5, "test fingerprint");
  checks.check(last.ranks == (world > 1 ? 1 : 0) && last.first == (world > 1 ? world - 1 : -1) &&
                   last.rank0_value == 5,
               "ranks_differing_from_rank0 names the one rank whose value differs");
  const RankDisagreement all_but_0 =
      ranks_differing_from_rank0(comm, static_cast<uint64_t>(rank) << 40, "test fingerprint");
  checks.check(all_but_0.ranks == world - 1 && all_but_0.first == (world > 1 ? 1 : -1) && all_but_0.rank0_value == 0,
               "ranks_differing_from_rank0 counts every rank that differs and names the lowest");
  if (world == 1) return;
  // The last rank would run one step more than the others.
  const int64_t steps = rank == world - 1 ? 11 : 10;
  std::string message;
  try {
    require_same(comm, steps, "training steps per epoch");
  } catch (const AllRanksError& error) {
    message = error.what();
  }
  checks.note("refusal seen by this rank: " + message);
  checks.check(message.find("the ranks disagree on training steps per epoch: this rank has " + std::to_string(steps) +
                            ", the ranks range from 10 to 11") == 0,
               "require_same refuses unequal steps on every rank, naming this rank's value and the range");
}

// Only rank 0 walks the folder: the other ranks are given a path that does not exist, and still
// receive rank 0's list. A folder rank 0 cannot list fails every rank with rank 0's message.
void test_shared_folder_listing(const DistributedContext& context, RankChecks& checks) {
  namespace fs = std::filesystem;
  const auto group = make_mpi_process_group(context, 25, 60);
  const data::FolderLister list = rank0_folder_lister(*group);
  const int rank = context.rank();
  std::string root = "/nonexistent/only-rank-0-lists/" + std::to_string(rank);
  if (rank == 0) {
    root = (fs::temp_directory_path() / ("rddp-shared-listing-" + std::to_string(getpid()))).string();
    fs::remove_all(root);
    for (const char* file : {"cat/b.png", "cat/a.jpg", "dog/deep/c.JPEG", "dog/notes.txt"}) {
      fs::create_directories(fs::path(root + "/" + file).parent_path());
      std::ofstream(root + "/" + file) << "listed, never decoded";
    }
  }
  const data::FolderListing listing = list(root, false);
  std::vector<std::string> names;
  std::vector<int32_t> labels;
  for (const data::LabelledFile& file : listing.files) {
    const size_t at = file.path.rfind('/');
    names.push_back(file.path.substr(at + 1));
    labels.push_back(file.label);
  }
  checks.check(listing.present && listing.classes == std::vector<std::string>{"cat", "dog"} &&
                   names == std::vector<std::string>{"a.jpg", "b.png", "c.JPEG"} &&
                   labels == std::vector<int32_t>{0, 0, 1},
               "every rank receives rank 0's listing of the image folder");
  if (rank == 0) fs::remove_all(root);

  checks.check(!list(root + "/missing", true).present,
               "a folder that may be absent and is: absent on every rank");
  std::string message;
  try {
    list(root + "/missing", false);
  } catch (const AllRanksError& error) {
    message = error.what();
  }
  checks.check(message.find("rddp-shared-listing-") != std::string::npos &&
                   message.find("does not exist") != std::string::npos,
               "a folder rank 0 cannot list fails every rank with rank 0's message");
}

int expected_world(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--expect-world") == 0) return std::atoi(argv[i + 1]);
  fail("usage: ddp_cpu_test --expect-world N");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    DistributedContext context(&argc, &argv);
    RankChecks checks(context);
    // Longer than any step here; a hang ends the test with a message instead of stalling CI.
    Watchdog watchdog(std::chrono::seconds(60));
    auto comm = make_comm(DeviceKind::cpu, context, CommOptions{&watchdog});
    test_context(context, expected_world(argc, argv), checks);
    test_collectives(context, *comm, checks);
    test_reduced_gradients(context, *comm, checks);
    test_bf16_reduced_gradients(context, *comm, checks);
    test_single_process_relation(context, *comm, checks);
    test_host_collectives(context, *comm, checks);
    test_shared_folder_listing(context, checks);
    return checks.finish();
  } catch (const std::exception& error) {
    fatal_abort(error.what());
  }
}
