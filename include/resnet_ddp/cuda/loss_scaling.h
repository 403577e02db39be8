#pragma once
// Dynamic loss scaling on the device (kernels/loss_scaling.cu), the steps of
// torch.cuda.amp.GradScaler around one optimizer step, with the maths of
// include/resnet_ddp/kernel_math/loss_scale.h. The state is one loss_scale::StepState in device memory; every
// launcher only enqueues work on `stream`, so a step never waits to learn whether it was
// skipped. In a step, in this order:
//   scale_loss_gradient   after the loss: d(loss)/d(logits) *= scale;
//   find_non_finite       after backward and the gradient allreduce, so that every rank looks
//                         at the same averaged gradients and takes the same decision;
//   begin_scaled_step     the verdict: inverse scale, step count or skip count, scale update,
//                         and AdamW's scalars of the new step count;
//   the optimizer kernel  with the StepState: unscales, or leaves everything as it is.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "resnet_ddp/kernel_math/adamw.h"
#include "resnet_ddp/kernel_math/loss_scale.h"

namespace rddp::cuda {

// values[i] *= state->scaler.scale for i < count.
void scale_loss_gradient(float* values, int64_t count, const loss_scale::StepState* state,
                         cudaStream_t stream);

// state->found_inf = 1 if any of grads[0, count) is Inf or NaN, else 0.
void find_non_finite(const float* grads, size_t count, loss_scale::StepState* state,
                     cudaStream_t stream);

// loss_scale::begin_step on the device (one thread). With `hyperparameters` (AdamW), also writes
// `scalars` for the step count after it (left unchanged by a skipped step, which the optimizer
// does not take anyway). SGD's scalars do not depend on the count: pass nulls.
void begin_scaled_step(loss_scale::StepState* state, const loss_scale::Config& config,
                       const adamw::Hyperparameters* hyperparameters,
                       adamw::Scalars<float>* scalars, cudaStream_t stream);

}  // namespace rddp::cuda
