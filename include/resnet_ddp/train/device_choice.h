#pragma once
// Which engine a run trains with: --device cpu or cuda as asked, or auto (a GPU when one
// answers). Throws Error for --device cuda where none answers, saying what to check.
#include <string>

#include "resnet_ddp/engine.h"
#include "resnet_ddp/train/options.h"

namespace rddp {

// `why` receives the reason, for the settings table ("auto: 4 CUDA device(s) visible").
DeviceKind choose_device(DeviceChoice choice, std::string* why);

}  // namespace rddp
