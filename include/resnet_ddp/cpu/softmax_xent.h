#pragma once
// Fused softmax + cross-entropy on the CPU, the twin of kernels/softmax_xent.cu: one pass
// per row gives the loss, the gradient of the mean loss and the top-1 and top-5 counts.
#include <cstdint>

namespace rddp::cpu {

struct XentResult {
  double loss = 0.0;  // mean over the batch, as nn.CrossEntropyLoss(reduction="mean")
  int64_t correct = 0;       // rows whose first maximal logit is the label
  int64_t correct_top5 = 0;  // rows whose label is among the first 5 (kernel_math/softmax_xent.h)
};

// loss_i = (1 - eps) * (-log p[label_i]) + eps / C * sum_c(-log p_c); dlogits = d(mean loss)/d
// logits, written only when dlogits is not null. Labels must be in [0, classes).
template <typename T>
XentResult softmax_cross_entropy(const T* logits, const int32_t* labels, int batch, int classes,
                                 T label_smoothing, T* dlogits);

}  // namespace rddp::cpu
