#include "resnet_ddp/train/device_choice.h"

#include "resnet_ddp/cuda/device.h"
#include "resnet_ddp/error.h"

namespace rddp {

DeviceKind choose_device(DeviceChoice choice, std::string* why) {
  std::string reason;
  const int devices = cuda::cuda_device_count_or_zero(&reason);
  switch (choice) {
    case DeviceChoice::cpu:
      *why = "--device cpu";
      return DeviceKind::cpu;
    case DeviceChoice::cuda:
      if (devices == 0)
        fail("--device cuda: no CUDA device answers (", reason, "); check nvidia-smi, CUDA_VISIBLE_DEVICES ",
             "and the job's GPU request (e.g. srun --gpus-per-task=1), or use --device cpu");
      *why = "--device cuda";
      return DeviceKind::cuda;
    case DeviceChoice::automatic:
      break;
  }
  if (devices > 0) {
    *why = "auto: " + std::to_string(devices) + " CUDA device(s) visible";
    return DeviceKind::cuda;
  }
  *why = "auto: no CUDA device answers (" + reason + ")";
  return DeviceKind::cpu;
}

}  // namespace rddp
