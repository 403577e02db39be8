#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "resnet_ddp/cpu/softmax_xent.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/rng.h"

using namespace rddp;

namespace {

// nn.CrossEntropyLoss(label_smoothing=eps) written out the long way, in long double (whose range
// holds exp(+-1e4), so no shift is needed): log p_c = x_c - log(sum_j exp(x_j)), the loss
// -sum_c target_c * log p_c, the gradient (p_c - target_c) / N. Nothing here comes from
// kernel_math/softmax_xent.h.
struct NaiveXent {
  long double loss = 0;
  std::vector<long double> dlogits;
  int64_t correct = 0;
  int64_t correct_top5 = 0;
};

// Whether the label is among the row's first k classes, sorted by logit with the lower index
// first among equals (no NaN here).
template <typename T>
bool label_in_top(const T* x, int classes, int label, int k) {
  std::vector<int> order(classes);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return x[a] > x[b]; });
  return std::find(order.begin(), order.begin() + std::min(k, classes), label) !=
         order.begin() + std::min(k, classes);
}

template <typename T>
NaiveXent naive_xent(const std::vector<T>& logits, const std::vector<int32_t>& labels, int batch,
                     int classes, double eps) {
  NaiveXent out;
  out.dlogits.resize(logits.size());
  for (int n = 0; n < batch; ++n) {
    const T* x = &logits[static_cast<size_t>(n) * classes];
    long double total = 0;
    for (int c = 0; c < classes; ++c) total += std::exp(static_cast<long double>(x[c]));
    long double row_loss = 0;
    const long double log_total = std::log(total);
    for (int c = 0; c < classes; ++c) {
      const long double log_p = static_cast<long double>(x[c]) - log_total;
      const long double target = (c == labels[n] ? 1.0L - eps : 0.0L) + eps / classes;
      // A class with no target weight adds nothing, even where log p underflows to -inf.
      if (target != 0) row_loss -= target * log_p;
      out.dlogits[static_cast<size_t>(n) * classes + c] = (std::exp(log_p) - target) / batch;
    }
    out.loss += row_loss / batch;
    int first_max = 0;
    for (int c = 1; c < classes; ++c)
      if (x[c] > x[first_max]) first_max = c;
    out.correct += first_max == labels[n];
    out.correct_top5 += label_in_top(x, classes, labels[n], 5);
  }
  return out;
}

template <typename T>
std::vector<T> random_logits(Rng& rng, int batch, int classes, double scale) {
  std::vector<T> logits(static_cast<size_t>(batch) * classes);
  for (T& x : logits) x = static_cast<T>(scale * rng.normal());
  return logits;
}

std::vector<int32_t> random_labels(Rng& rng, int batch, int classes) {
  std::vector<int32_t> labels(batch);
  for (int32_t& label : labels) label = static_cast<int32_t>(rng.below(classes));
  return labels;
}

// Compares the twin with the long-double reference. `rel` bounds the relative error of every
// probability: in double it is tiny; in float the row's sum of C exponentials may lose up to
// C units in the last place, which shifts log-sum-exp, and so every p, by as much.
template <typename T>
void check_against_naive(int batch, int classes, double eps, double scale, uint64_t seed) {
  Rng rng(seed);
  const auto logits = random_logits<T>(rng, batch, classes, scale);
  const auto labels = random_labels(rng, batch, classes);
  std::vector<T> dlogits(logits.size(), std::numeric_limits<T>::quiet_NaN());
  const auto got = cpu::softmax_cross_entropy<T>(logits.data(), labels.data(), batch, classes,
                                                 static_cast<T>(eps), dlogits.data());
  const auto want = naive_xent(logits, labels, batch, classes, eps);
  const double unit = std::is_same_v<T, float> ? FLT_EPSILON : DBL_EPSILON;
  const double rel = (classes + 64) * unit;

  CHECK(got.correct == want.correct);
  CHECK(got.correct_top5 == want.correct_top5);
  // The loss terms are of the order of |z| <= 8 * scale, each with error rel.
  CHECK(std::abs(got.loss - static_cast<double>(want.loss)) <=
        rel * (8 * scale + std::abs(static_cast<double>(want.loss))));
  for (size_t i = 0; i < dlogits.size(); ++i) {
    // (p - target) / N with p known to rel: the error is at most rel * (|ref| + 1/N).
    const double ref = static_cast<double>(want.dlogits[i]);
    if (!(std::abs(dlogits[i] - ref) <= rel * (std::abs(ref) + 1.0 / batch))) {
      FAIL_CHECK("dlogits[" << i << "] = " << dlogits[i] << ", reference " << ref);
    }
  }
}

}  // namespace

TEST_CASE("softmax cross-entropy matches a long-double reference") {
  const int shapes[][2] = {{1, 1}, {1, 2}, {3, 2}, {7, 10}, {4, 1000}, {5, 1001}};
  for (double eps : {0.0, 0.1}) {
    for (const auto& shape : shapes) {
      CAPTURE(eps);
      CAPTURE(shape[0]);
      CAPTURE(shape[1]);
      const uint64_t seed = derive_seed(shape[0] * 10007 + shape[1], eps == 0 ? "0" : "0.1");
      check_against_naive<double>(shape[0], shape[1], eps, 3.0, seed);
      check_against_naive<float>(shape[0], shape[1], eps, 3.0, seed);
    }
  }
}

TEST_CASE("the gradient is the derivative of the mean loss (central differences in double)") {
  const int batch = 3, classes = 5;
  for (double eps : {0.0, 0.1}) {
    CAPTURE(eps);
    Rng rng(11);
    auto logits = random_logits<double>(rng, batch, classes, 2.0);
    const auto labels = random_labels(rng, batch, classes);
    std::vector<double> dlogits(logits.size());
    cpu::softmax_cross_entropy<double>(logits.data(), labels.data(), batch, classes, eps,
                                       dlogits.data());
    const double h = 1e-5;
    for (size_t i = 0; i < logits.size(); ++i) {
      const double saved = logits[i];
      logits[i] = saved + h;
      const double up =
          cpu::softmax_cross_entropy<double>(logits.data(), labels.data(), batch, classes, eps,
                                             nullptr).loss;
      logits[i] = saved - h;
      const double down =
          cpu::softmax_cross_entropy<double>(logits.data(), labels.data(), batch, classes, eps,
                                             nullptr).loss;
      logits[i] = saved;
      // Central differences err by O(h^2 * f''') ~ 1e-10, plus rounding ~ 1e-16 / h.
      CAPTURE(i);
      CHECK(std::abs(dlogits[i] - (up - down) / (2 * h)) <= 1e-9);
    }
  }
}

TEST_CASE("huge logits stay finite") {
  const int batch = 3, classes = 4;
  const std::vector<float> logits = {1e4f, -1e4f, 0.0f,  1e4f - 1.0f,   // near tie at the top
                                     -1e4f, -1e4f, -1e4f, -1e4f,        // all minimal
                                     -1e4f, 1e4f,  1e4f,  -3.0f};       // exact tie
  const std::vector<int32_t> labels = {1, 2, 2};
  for (float eps : {0.0f, 0.1f}) {
    CAPTURE(eps);
    std::vector<float> dlogits(logits.size(), NAN);
    const auto got = cpu::softmax_cross_entropy<float>(logits.data(), labels.data(), batch,
                                                       classes, eps, dlogits.data());
    const auto want = naive_xent(logits, labels, batch, classes, eps);
    CHECK(std::isfinite(got.loss));
    // The loss is ~(2e4 * (1 - eps) + ...) / 3: float keeps 7 digits of it.
    CHECK(got.loss == doctest::Approx(static_cast<double>(want.loss)).epsilon(1e-6));
    for (size_t i = 0; i < dlogits.size(); ++i) {
      CAPTURE(i);
      CHECK(std::isfinite(dlogits[i]));
      CHECK(std::abs(dlogits[i] - static_cast<double>(want.dlogits[i])) <= 1e-6);
    }
  }
}

TEST_CASE("'correct' counts the first maximal logit, as torch.argmax") {
  const int classes = 4;
  const std::vector<float> logits = {1, 3, 3, 0,   // tie: index 1 wins, not 2
                                     1, 3, 3, 0,
                                     2, 2, 2, 2,   // all equal: index 0
                                     2, 2, 2, 2,
                                     1, NAN, 5, 0};  // torch.argmax takes NaN as the maximum
  const std::vector<int32_t> labels = {1, 2, 0, 3, 1};
  const int batch = static_cast<int>(labels.size());
  std::vector<float> dlogits(logits.size());
  const auto got = cpu::softmax_cross_entropy<float>(logits.data(), labels.data(), batch,
                                                     classes, 0.0f, dlogits.data());
  CHECK(got.correct == 3);  // rows 0, 2 and 4
  CHECK(std::isnan(got.loss));
  // Without the NaN row the four tie rows alone: 2 correct.
  CHECK(cpu::softmax_cross_entropy<float>(logits.data(), labels.data(), 4, classes, 0.0f, nullptr)
            .correct == 2);
}

TEST_CASE("'correct_top5' counts labels among the five largest logits, ties to the lower index") {
  const int classes = 8;
  const std::vector<float> logits = {7, 6, 5, 4, 3, 2, 1, 0,   // label 4 is 5th: in
                                     7, 6, 5, 4, 3, 2, 1, 0,   // label 5 is 6th: out
                                     1, 1, 1, 1, 1, 1, 1, 1,   // all tied: index 4 is 5th
                                     1, 1, 1, 1, 1, 1, 1, 1,   // ... and index 5 is 6th
                                     0, 9, 9, 9, 9, 9, 0, 9,   // label 7 behind five ties
                                     0, 0, 0, 0, 0, 0, 0, 9};  // label 7 first: top-1 too
  const std::vector<int32_t> labels = {4, 5, 4, 5, 7, 7};
  const int batch = static_cast<int>(labels.size());
  const auto got = cpu::softmax_cross_entropy<float>(logits.data(), labels.data(), batch,
                                                     classes, 0.0f, nullptr);
  CHECK(got.correct_top5 == 3);  // rows 0, 2 and 5
  CHECK(got.correct == 1);       // row 5
  // Five classes or fewer: every label is among the first five, even the smallest logit's.
  const std::vector<float> four = {3, 2, 1, 0};
  const int32_t last = 3;
  const auto small = cpu::softmax_cross_entropy<float>(four.data(), &last, 1, 4, 0.0f, nullptr);
  CHECK(small.correct_top5 == 1);
  CHECK(small.correct == 0);
}

TEST_CASE("a -inf logit leaves the unsmoothed loss finite") {
  const std::vector<double> logits = {-INFINITY, 0.0, 1.0};
  const std::vector<int32_t> labels = {2};
  std::vector<double> dlogits(3);
  const auto got =
      cpu::softmax_cross_entropy<double>(logits.data(), labels.data(), 1, 3, 0.0, dlogits.data());
  // p = softmax(0, 1) over the two finite logits.
  CHECK(got.loss == doctest::Approx(std::log(1.0 + std::exp(-1.0))));
  CHECK(dlogits[0] == 0.0);
}

TEST_CASE("bad arguments are refused with a reason") {
  const std::vector<float> logits(6, 0.0f);
  const std::vector<int32_t> labels = {0, 3};
  CHECK_THROWS_WITH_AS(cpu::softmax_cross_entropy<float>(logits.data(), labels.data(), 2, 3,
                                                         0.0f, nullptr),
                       doctest::Contains("label 3 of row 1 is outside [0, 3)"), Error);
  const std::vector<int32_t> good = {0, 2};
  CHECK_THROWS_WITH_AS(cpu::softmax_cross_entropy<float>(logits.data(), good.data(), 2, 3,
                                                         -0.1f, nullptr),
                       doctest::Contains("label smoothing must be in [0, 1]"), Error);
  CHECK_THROWS_AS(cpu::softmax_cross_entropy<float>(logits.data(), good.data(), 0, 3, 0.0f,
                                                    nullptr),
                  Error);
}
