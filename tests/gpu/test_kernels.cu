// Each of our CUDA kernels against its CPU twin on fresh random inputs. Outputs are poisoned
// with NaN before a launch so that an element the kernel forgets to write cannot pass.
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "resnet_ddp/cpu/softmax_xent.h"
#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/kernels.h"
#include "resnet_ddp/model_spec.h"
#include "resnet_ddp/optimizer.h"
#include "resnet_ddp/param_layout.h"
#include "resnet_ddp/rng.h"
#include "support/test_tensors.h"

using namespace rddp;
using testing::bitwise_equal;

namespace {

// `count` elements on the device, with room for `offset` more in front, so that a test can
// hand a kernel a pointer that is deliberately not 16-byte aligned.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t count, size_t offset = 0) : count_(count), offset_(offset) {
    RDDP_CUDA_CHECK(cudaMalloc(&base_, (count + offset) * sizeof(T)));
  }
  ~DeviceArray() { cudaFree(base_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return base_ + offset_; }
  void upload(const std::vector<T>& host) {
    REQUIRE(host.size() == count_);
    RDDP_CUDA_CHECK(cudaMemcpy(get(), host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    RDDP_CUDA_CHECK(cudaMemcpy(host.data(), get(), count_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  // All bits set: a NaN in every float, -1 in every integer.
  void poison() { RDDP_CUDA_CHECK(cudaMemset(get(), 0xff, count_ * sizeof(T))); }

 private:
  T* base_ = nullptr;
  size_t count_, offset_;
};

// A blocking stream (not cudaStreamNonBlocking): the plain cudaMemcpy and cudaMemset calls of
// DeviceArray run on the legacy default stream, which a blocking stream waits for, so every
// upload and poisoning is done before the kernel that follows reads the buffer.
class Stream {
 public:
  Stream() { RDDP_CUDA_CHECK(cudaStreamCreate(&stream_)); }
  ~Stream() { cudaStreamDestroy(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  operator cudaStream_t() const { return stream_; }
  void sync() const { RDDP_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_ = nullptr;
};

// ---- softmax cross-entropy

struct XentOutputs {
  std::vector<float> dlogits;
  cuda::XentMetrics metrics;
};

XentOutputs run_xent_kernel(const std::vector<float>& logits, const std::vector<int32_t>& labels,
                            int batch, int classes, float smoothing, const Stream& stream) {
  DeviceArray<float> d_logits(logits.size()), d_dlogits(logits.size());
  DeviceArray<int32_t> d_labels(labels.size());
  DeviceArray<cuda::XentRow> d_rows(batch);
  DeviceArray<cuda::XentMetrics> d_metrics(1);
  d_logits.upload(logits);
  d_labels.upload(labels);
  d_dlogits.poison();
  d_rows.poison();
  d_metrics.poison();
  cuda::softmax_cross_entropy<float>(d_logits.get(), d_labels.get(), batch, classes, smoothing,
                                     d_dlogits.get(), d_rows.get(), d_metrics.get(), stream);
  stream.sync();
  return {d_dlogits.download(), d_metrics.download()[0]};
}

// The kernel and its twin differ only in the order of each row's sums. The twin's sequential
// float sum of C exponentials may be off by C units in the last place (the kernel's, spread
// over 32 or 256 lanes, by far fewer); that error moves log-sum-exp, and so every probability,
// by the same relative amount, and expf/logf add a few ulps more. Hence a relative tolerance of
// (C + 64) ulps on p, i.e. on (p - target) / N up to the 1/N of the target.
void check_xent_against_twin(const std::vector<float>& logits, const std::vector<int32_t>& labels,
                             int batch, int classes, float smoothing, double logit_scale,
                             const Stream& stream) {
  const XentOutputs got = run_xent_kernel(logits, labels, batch, classes, smoothing, stream);
  std::vector<float> want(logits.size());
  const cpu::XentResult want_metrics = cpu::softmax_cross_entropy<float>(
      logits.data(), labels.data(), batch, classes, smoothing, want.data());

  const double rel = (classes + 64) * static_cast<double>(FLT_EPSILON);
  CHECK(got.metrics.correct == want_metrics.correct);
  CHECK(got.metrics.bad_labels == 0);
  // A row's loss is lse - (1-eps) z_y - eps/C sum z: terms of size up to ~8 * logit_scale.
  CHECK(std::abs(got.metrics.loss - want_metrics.loss) <=
        rel * (1.0 + std::abs(want_metrics.loss) + 8.0 * logit_scale));
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double ref = want[i];
    if (!(std::abs(got.dlogits[i] - ref) <= rel * (std::abs(ref) + 1.0 / batch)) && bad++ < 5)
      FAIL_CHECK("dlogits[" << i << "] (row " << i / classes << ", class " << i % classes
                            << ") = " << got.dlogits[i] << ", CPU twin " << ref);
  }
  CHECK(bad == 0);
}

std::vector<int32_t> random_labels(Rng& rng, int batch, int classes) {
  std::vector<int32_t> labels(batch);
  for (int32_t& label : labels) label = static_cast<int32_t>(rng.below(classes));
  return labels;
}

// ---- optimizers

template <typename Grad>
std::vector<Grad> to_grad(const std::vector<float>& values) {
  std::vector<Grad> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = static_cast<Grad>(values[i]);
  return out;
}

template <typename Grad>
std::vector<float> to_float(const std::vector<Grad>& values) {
  std::vector<float> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = static_cast<float>(values[i]);
  return out;
}

std::vector<float> normal_floats(Rng& rng, size_t count, double scale) {
  std::vector<float> values(count);
  for (float& v : values) v = static_cast<float>(scale * rng.normal());
  return values;
}

// Kernel and twin evaluate the same float expressions in the same order; they differ only
// where nvcc fuses a*b+c into one FMA (one rounding fewer), a unit in the last place of the
// larger term per operation, ~10 operations per step. 32 ulps relative covers three steps;
// the absolute part, 8 ulps of the largest value in the buffer, covers results that cancel
// to far below the size of their terms (a moment whose gradient changed sign).
void check_buffer(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  REQUIRE(got.size() == want.size());
  float scale = 0;
  for (float v : want) scale = std::max(scale, std::abs(v));
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double tolerance = 32.0 * FLT_EPSILON * std::abs(want[i]) + 8.0 * FLT_EPSILON * scale;
    if (!(std::abs(got[i] - want[i]) <= tolerance) && bad++ < 5)
      FAIL_CHECK(what << "[" << i << "] = " << got[i] << ", CPU twin " << want[i]);
  }
  CHECK(bad == 0);
}

const double kLearningRates[] = {1e-2, 4e-2, 2e-3};  // a schedule that moves between steps

enum class ScalarSource { by_value, device_memory };

// Three steps of the kernel against three of CpuOptimizer<float>, from the same start, with
// the gradients the kernel sees (bf16 ones widened to float exactly).
template <typename Grad>
void check_optimizer_kernel(const OptimizerConfig& config, size_t elements, size_t offset,
                            ScalarSource source, const Stream& stream) {
  Rng rng(derive_seed(elements * 8 + offset, to_string(config.kind)));
  std::vector<float> cpu_params = normal_floats(rng, elements, 1.0);
  CpuOptimizer<float> twin(config, elements);
  const bool adamw = config.kind == OptimizerKind::adamw;
  const bool has_buffer = adamw || config.momentum != 0.0;

  DeviceArray<float> params(elements, offset), first(elements, offset), second(elements, offset);
  DeviceArray<Grad> grads(elements, offset);
  DeviceArray<adamw::Scalars<float>> adamw_scalars(1);
  DeviceArray<sgd::Scalars<float>> sgd_scalars(1);
  params.upload(cpu_params);
  RDDP_CUDA_CHECK(cudaMemset(first.get(), 0, elements * sizeof(float)));
  RDDP_CUDA_CHECK(cudaMemset(second.get(), 0, elements * sizeof(float)));

  for (double lr : kLearningRates) {
    const std::vector<Grad> step_grads = to_grad<Grad>(normal_floats(rng, elements, 0.1));
    grads.upload(step_grads);
    twin.step(cpu_params.data(), to_float(step_grads).data(), lr);
    if (adamw) {
      const auto s = adamw::scalars<float>(lr, config.weight_decay, config.beta1, config.beta2,
                                           config.eps, twin.step_count());
      if (source == ScalarSource::by_value) {
        cuda::adamw_step(params.get(), grads.get(), first.get(), second.get(), elements, s,
                         stream);
      } else {
        adamw_scalars.upload({s});
        cuda::adamw_step(params.get(), grads.get(), first.get(), second.get(), elements,
                         static_cast<const adamw::Scalars<float>*>(adamw_scalars.get()), stream);
      }
    } else {
      const auto s = sgd::scalars<float>(lr, config.weight_decay, config.momentum,
                                         config.nesterov);
      float* buffer = has_buffer ? first.get() : nullptr;
      if (source == ScalarSource::by_value) {
        cuda::sgd_step(params.get(), grads.get(), buffer, elements, s, stream);
      } else {
        sgd_scalars.upload({s});
        cuda::sgd_step(params.get(), grads.get(), buffer, elements,
                       static_cast<const sgd::Scalars<float>*>(sgd_scalars.get()), stream);
      }
    }
    stream.sync();
  }
  check_buffer(params.download(), cpu_params, "params");
  if (has_buffer) check_buffer(first.download(), twin.first_moment(), "first moment");
  if (adamw) check_buffer(second.download(), twin.second_moment(), "second moment");
}

size_t resnet18_parameter_elements() {
  return ParamLayout(describe(ModelSpec{})).parameter_elements();
}

}  // namespace

TEST_CASE("softmax_cross_entropy kernel matches its CPU twin") {
  Stream stream;
  const float logit_scale = 4.0f;
  for (int batch : {1, 2, 31, 64, 513}) {
    // 256 and 257 sit on either side of the switch from a warp to a block per row.
    for (int classes : {2, 10, 256, 257, 1000, 1001}) {
      for (float smoothing : {0.0f, 0.1f}) {
        CAPTURE(batch);
        CAPTURE(classes);
        CAPTURE(smoothing);
        Rng rng(derive_seed(batch * 4099 + classes, smoothing == 0 ? "plain" : "smoothed"));
        const std::vector<float> logits =
            normal_floats(rng, static_cast<size_t>(batch) * classes, logit_scale);
        check_xent_against_twin(logits, random_labels(rng, batch, classes), batch, classes,
                                smoothing, logit_scale, stream);
      }
    }
  }
}

TEST_CASE("softmax_cross_entropy kernel: ties, huge logits, reproducible bits") {
  Stream stream;
  for (int classes : {10, 1000}) {
    CAPTURE(classes);
    const int batch = 513;
    Rng rng(derive_seed(classes, "ties"));
    // Logits from {0, 1, 2, 3}: most rows tie at their maximum, and the first index must win.
    std::vector<float> ties(static_cast<size_t>(batch) * classes);
    for (float& x : ties) x = static_cast<float>(rng.below(4));
    const auto labels = random_labels(rng, batch, classes);
    check_xent_against_twin(ties, labels, batch, classes, 0.1f, 4.0, stream);

    std::vector<float> huge(ties.size());
    for (float& x : huge) x = rng.uniform() < 0.5 ? -1e4f : 1e4f;
    const XentOutputs got = run_xent_kernel(huge, labels, batch, classes, 0.1f, stream);
    CHECK(std::isfinite(got.metrics.loss));
    CHECK(std::all_of(got.dlogits.begin(), got.dlogits.end(),
                      [](float g) { return std::isfinite(g); }));
    check_xent_against_twin(huge, labels, batch, classes, 0.1f, 1e4, stream);

    const std::vector<float> logits = normal_floats(rng, ties.size(), 4.0);
    const XentOutputs first = run_xent_kernel(logits, labels, batch, classes, 0.1f, stream);
    const XentOutputs second = run_xent_kernel(logits, labels, batch, classes, 0.1f, stream);
    CHECK(bitwise_equal(first.dlogits, second.dlogits));
    CHECK(first.metrics.loss == second.metrics.loss);  // no atomics: the same bits every time
  }
}

TEST_CASE("softmax_cross_entropy kernel flags labels outside [0, classes)") {
  Stream stream;
  const int batch = 4;
  for (int classes : {10, 300}) {  // a warp per row, a block per row
    CAPTURE(classes);
    Rng rng(3);
    const std::vector<float> logits = normal_floats(rng, batch * classes, 1.0);
    const std::vector<int32_t> labels = {5, -1, classes, 7};
    const XentOutputs got = run_xent_kernel(logits, labels, batch, classes, 0.0f, stream);
    CHECK(got.metrics.bad_labels == 2);
    CHECK(std::isnan(got.metrics.loss));
    // The good rows are written (the poison is NaN); the bad ones are NaN either way.
    CHECK(std::all_of(got.dlogits.begin(), got.dlogits.begin() + classes,
                      [](float g) { return std::isfinite(g); }));
    CHECK(std::all_of(got.dlogits.begin() + 3 * classes, got.dlogits.end(),
                      [](float g) { return std::isfinite(g); }));
    CHECK_THROWS_AS(run_xent_kernel(logits, labels, batch, classes, 1.5f, stream), Error);
  }
}

TEST_CASE("adamw kernel matches the CPU optimizer") {
  Stream stream;
  OptimizerConfig config;  // AdamW, PyTorch's defaults
  config.weight_decay = 0.1;
  // 1001: a tail after the vector loop; offset 1: misaligned, one element at a time.
  const size_t cases[][2] = {{64, 0},      {1001, 0}, {1001, 1},
                             {1 << 20, 0}, {1 << 20, 1}, {resnet18_parameter_elements(), 0}};
  for (const auto& c : cases) {
    CAPTURE(c[0]);
    CAPTURE(c[1]);
    check_optimizer_kernel<float>(config, c[0], c[1], ScalarSource::by_value, stream);
    check_optimizer_kernel<__nv_bfloat16>(config, c[0], c[1], ScalarSource::device_memory,
                                          stream);
  }
  config.weight_decay = 0.0;
  check_optimizer_kernel<float>(config, 4096, 0, ScalarSource::device_memory, stream);
}

TEST_CASE("sgd kernel matches the CPU optimizer") {
  Stream stream;
  struct Variant {
    double momentum;
    bool nesterov;
    double weight_decay;
  };
  for (const Variant& v : {Variant{0.0, false, 0.0}, Variant{0.9, false, 5e-4},
                           Variant{0.9, true, 1e-2}}) {
    OptimizerConfig config;
    config.kind = OptimizerKind::sgd;
    config.momentum = v.momentum;
    config.nesterov = v.nesterov;
    config.weight_decay = v.weight_decay;
    CAPTURE(v.momentum);
    CAPTURE(v.nesterov);
    for (const auto& c : {std::pair<size_t, size_t>{1001, 1}, {1 << 20, 0},
                          {resnet18_parameter_elements(), 0}}) {
      CAPTURE(c.first);
      CAPTURE(c.second);
      check_optimizer_kernel<float>(config, c.first, c.second, ScalarSource::by_value, stream);
      check_optimizer_kernel<__nv_bfloat16>(config, c.first, c.second,
                                            ScalarSource::device_memory, stream);
    }
  }
}

TEST_CASE("a captured adamw step follows the schedule through its device scalars") {
  Stream stream;
  OptimizerConfig config;
  const size_t elements = 4096;
  Rng rng(17);
  std::vector<float> cpu_params = normal_floats(rng, elements, 1.0);
  const std::vector<float> grads = normal_floats(rng, elements, 0.1);
  CpuOptimizer<float> twin(config, elements);

  DeviceArray<float> params(elements), exp_avg(elements), exp_avg_sq(elements), d_grads(elements);
  DeviceArray<adamw::Scalars<float>> scalars(1);
  params.upload(cpu_params);
  d_grads.upload(grads);
  RDDP_CUDA_CHECK(cudaMemset(exp_avg.get(), 0, elements * sizeof(float)));
  RDDP_CUDA_CHECK(cudaMemset(exp_avg_sq.get(), 0, elements * sizeof(float)));

  cudaGraph_t graph;
  RDDP_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  cuda::adamw_step(params.get(), d_grads.get(), exp_avg.get(), exp_avg_sq.get(), elements,
                   static_cast<const adamw::Scalars<float>*>(scalars.get()), stream);
  RDDP_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  RDDP_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));

  for (double lr : kLearningRates) {
    twin.step(cpu_params.data(), grads.data(), lr);
    scalars.upload({adamw::scalars<float>(lr, config.weight_decay, config.beta1, config.beta2,
                                          config.eps, twin.step_count())});
    RDDP_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    stream.sync();
  }
  RDDP_CUDA_CHECK(cudaGraphExecDestroy(exec));
  RDDP_CUDA_CHECK(cudaGraphDestroy(graph));
  check_buffer(params.download(), cpu_params, "params");
  check_buffer(exp_avg.download(), twin.first_moment(), "exp_avg");
  check_buffer(exp_avg_sq.download(), twin.second_moment(), "exp_avg_sq");
}

TEST_CASE("the optimizer kernels round every updated parameter into the bfloat16 copy") {
  Stream stream;
  OptimizerConfig adamw;
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::sgd;
  sgd.momentum = 0.9;
  // 1001 aligned: vector loop and tail; offset 1: one element at a time.
  const size_t cases[][2] = {{1001, 0}, {1001, 1}, {1 << 20, 0}};
  for (const OptimizerConfig& config : {adamw, sgd}) {
    for (const auto& c : cases) {
      const size_t elements = c[0], offset = c[1];
      CAPTURE(elements);
      CAPTURE(offset);
      Rng rng(derive_seed(elements + offset, "bf16 copy"));
      DeviceArray<float> params(elements, offset), first(elements, offset),
          second(elements, offset), grads(elements, offset);
      DeviceArray<__nv_bfloat16> copy(elements, offset);
      params.upload(normal_floats(rng, elements, 1.0));
      grads.upload(normal_floats(rng, elements, 0.1));
      RDDP_CUDA_CHECK(cudaMemset(first.get(), 0, elements * sizeof(float)));
      RDDP_CUDA_CHECK(cudaMemset(second.get(), 0, elements * sizeof(float)));
      copy.poison();
      if (config.kind == OptimizerKind::adamw)
        cuda::adamw_step(params.get(), grads.get(), first.get(), second.get(), elements,
                         adamw::scalars<float>(1e-2, config.weight_decay, config.beta1,
                                               config.beta2, config.eps, 1),
                         stream, copy.get());
      else
        cuda::sgd_step(params.get(), grads.get(), first.get(), elements,
                       sgd::scalars<float>(1e-2, 0.0, config.momentum, false), stream,
                       copy.get());
      stream.sync();
      const std::vector<float> updated = params.download();
      const std::vector<__nv_bfloat16> got = copy.download();
      size_t bad = 0;
      for (size_t i = 0; i < elements; ++i) {
        const __nv_bfloat16 want = __float2bfloat16_rn(updated[i]);
        if (std::memcmp(&got[i], &want, sizeof(want)) != 0 && bad++ < 5)
          FAIL_CHECK("copy[" << i << "] = " << static_cast<float>(got[i]) << ", expected "
                             << static_cast<float>(want) << " (parameter " << updated[i] << ")");
      }
      CHECK(bad == 0);
    }
  }
}
