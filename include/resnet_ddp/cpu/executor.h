#pragma once
// The CPU executor: forward and backward of the whole network described by a ModelState,
// for any batch up to the one it was built for and any input size. It is the readable
// reference every GPU result is checked against, and it trains in CI.
#include <functional>
#include <memory>
#include <vector>

#include "resnet_ddp/model_state.h"

namespace rddp::cpu {

// Called as each parameter's gradient becomes final during backward, in layout order: the
// distributed reducer launches a bucket's allreduce as soon as all of its tensors are in.
using GradReadyFn = std::function<void(const TensorInfo&)>;

template <typename T>
class Executor {
 public:
  // Activations are allocated once here, for `max_batch` images of height x width.
  Executor(ModelState<T>& state, int max_batch, int height, int width);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // input: [batch, in_channels, height, width], already normalised. Training mode uses and
  // updates the BatchNorm batch statistics; evaluation mode uses the running ones.
  // Returns the logits, [batch, num_classes], valid until the next forward.
  const T* forward(const T* input, int batch, bool training);

  // Gradients of the loss with respect to every parameter, given d(loss)/d(logits) of the
  // last training forward. Writes state.grads; reports each tensor through `ready`.
  void backward(const T* dlogits, const GradReadyFn& ready = {});

  int max_batch() const { return max_batch_; }
  int height() const { return height_; }
  int width() const { return width_; }

  // A ReLU input of a training forward that lies within a margin of zero: another executor's
  // rounding may put it on the ReLU's other side, and then a whole element of the gradient goes
  // one way there and the other way here. `shift` is the bias of the BatchNorm feeding that
  // ReLU, whose channel `channel` holds the value; `scale` is the largest magnitude among the
  // ReLU's inputs. Tests that compare two executors move such a channel's shift until none is
  // left (tests/support/relu_ties.h).
  struct ReluTie {
    const TensorInfo* shift = nullptr;
    int channel = 0;
    double value = 0.0, scale = 0.0;
  };
  // From the next training forward on, record the ReLU inputs within `relative_margin` times
  // their ReLU's scale of zero (0, the default, records none).
  void watch_relu_ties(double relative_margin) { tie_margin_ = relative_margin; }
  // Those of the last training forward, in the order the forward met them.
  const std::vector<ReluTie>& relu_ties() const { return ties_; }

 private:
  struct Plan;
  ModelState<T>& state_;
  int max_batch_, height_, width_;
  std::unique_ptr<Plan> plan_;
  double tie_margin_ = 0.0;
  std::vector<ReluTie> ties_;

  void note_relu_ties(const TensorInfo* shift, const T* inputs, int batch, int channels,
                      int64_t plane);
};

}  // namespace rddp::cpu
