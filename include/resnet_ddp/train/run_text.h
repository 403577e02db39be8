#pragma once
// How the run's lines write numbers and metrics: the progress and epoch lines, the settings
// table and the errors quote them alike.
#include <cstdint>
#include <string>

#include "resnet_ddp/engine.h"

namespace rddp {

std::string fixed(double value, int digits);  // "%.*f"
std::string general(double value);            // shortest: 0.001, 1e-08, 0.9
std::string percent(int64_t part, int64_t whole);  // "12.34%", "-" of nothing
// `separator` and "MFU 15.2%" where the device's peak is known (`mfu` finite), else nothing.
std::string mfu_part(const char* separator, double mfu);

double mean_loss(const Metrics& m);
double accuracy(const Metrics& m);
double top5_accuracy(const Metrics& m);
// Top-1, and top-5 beside it where the model has more than five classes (with five or fewer it
// is always 100 %), as ImageNet results are quoted: "69.76% (top-5 89.08%)".
std::string accuracies(const Metrics& m, int classes);

}  // namespace rddp
