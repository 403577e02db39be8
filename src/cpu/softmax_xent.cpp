#include "resnet_ddp/cpu/softmax_xent.h"

#include "resnet_ddp/error.h"
#include "resnet_ddp/kernel_math/softmax_xent.h"

namespace rddp::cpu {

// The same formulas as the CUDA kernel, with the row reductions as plain left-to-right loops.
// The arithmetic type is the storage type: float like the kernel, double for gradient checks.
template <typename T>
XentResult softmax_cross_entropy(const T* logits, const int32_t* labels, int batch, int classes,
                                 T label_smoothing, T* dlogits) {
  if (batch < 1 || classes < 1)
    fail("softmax_cross_entropy: batch (", batch, ") and classes (", classes,
         ") must both be at least 1");
  if (!(label_smoothing >= T(0) && label_smoothing <= T(1)))
    fail("softmax_cross_entropy: label smoothing must be in [0, 1], got ", label_smoothing);
  for (int row = 0; row < batch; ++row)
    if (labels[row] < 0 || labels[row] >= classes)
      fail("softmax_cross_entropy: label ", labels[row], " of row ", row, " is outside [0, ",
           classes, "): the data's labels do not fit a model of ", classes,
           " classes; check the dataset or the number of classes");

  const auto params = xent::make_params<T>(label_smoothing, classes, batch);
  XentResult result;
  double loss_sum = 0.0;
  for (int row = 0; row < batch; ++row) {
    const T* x = logits + static_cast<size_t>(row) * classes;
    const int label = labels[row];

    xent::RowMax<T> best = xent::row_max_identity<T>(classes);
    for (int c = 0; c < classes; ++c) best = xent::combine(best, xent::RowMax<T>{x[c], c});
    xent::RowSums<T> sums{T(0), T(0)};
    xent::LabelRank rank{0};
    for (int c = 0; c < classes; ++c) {
      sums = xent::combine(sums, xent::row_sums_term(x[c], best.value));
      rank = xent::combine(rank, xent::label_rank_term(x[c], c, x[label], label));
    }
    const T lse = xent::log_sum_exp(sums);

    loss_sum += xent::row_loss(params, lse, x[label] - best.value, sums);
    result.correct += best.index == label;
    result.correct_top5 += rank.ahead < xent::kTopK;
    if (dlogits != nullptr) {
      T* dx = dlogits + static_cast<size_t>(row) * classes;
      for (int c = 0; c < classes; ++c)
        dx[c] = xent::dlogit(params, x[c] - best.value, lse, c == label);
    }
  }
  result.loss = loss_sum / batch;
  return result;
}

template XentResult softmax_cross_entropy<float>(const float*, const int32_t*, int, int, float,
                                                 float*);
template XentResult softmax_cross_entropy<double>(const double*, const int32_t*, int, int,
                                                  double, double*);

}  // namespace rddp::cpu
