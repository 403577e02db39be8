#include "resnet_ddp/data/dataset.h"

#include "resnet_ddp/data/transform.h"

namespace rddp::data {

Sample Dataset::get_crop(size_t index, const ChooseCrop& choose) const {
  Sample sample = get(index);
  sample.image = crop(sample.image, choose(sample.image.height, sample.image.width));
  return sample;
}

}  // namespace rddp::data
