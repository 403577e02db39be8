#include "resnet_ddp/train/run_text.h"

#include <cmath>
#include <cstdio>

namespace rddp {

std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

std::string general(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

std::string percent(int64_t part, int64_t whole) {
  return whole > 0 ? fixed(100.0 * part / whole, 2) + "%" : "-";
}

std::string mfu_part(const char* separator, double mfu) {
  return std::isfinite(mfu) ? separator + std::string("MFU ") + fixed(100.0 * mfu, 1) + "%" : "";
}

double mean_loss(const Metrics& m) { return m.count > 0 ? m.loss_sum / m.count : 0.0; }

double accuracy(const Metrics& m) {
  return m.count > 0 ? static_cast<double>(m.correct) / m.count : 0.0;
}

double top5_accuracy(const Metrics& m) {
  return m.count > 0 ? static_cast<double>(m.correct_top5) / m.count : 0.0;
}

std::string accuracies(const Metrics& m, int classes) {
  std::string text = percent(m.correct, m.count);
  if (classes > 5) text += " (top-5 " + percent(m.correct_top5, m.count) + ")";
  return text;
}

}  // namespace rddp
