#include "resnet_ddp/data/in_memory_dataset.h"

#include <cstring>

#include "resnet_ddp/error.h"

namespace rddp::data {

namespace {

class InMemoryDataset final : public Dataset {
 public:
  explicit InMemoryDataset(ImageArray array) : array_(std::move(array)) {
    image_bytes_ = size_t(array_.height) * array_.width * array_.channels;
    RDDP_ASSERT(array_.pixels.size() == array_.labels.size() * image_bytes_);
  }

  size_t size() const override { return array_.labels.size(); }
  int num_classes() const override { return array_.num_classes; }
  int channels() const override { return array_.channels; }
  int height() const override { return array_.height; }
  int width() const override { return array_.width; }

  Sample get(size_t index) const override {
    RDDP_ASSERT(index < size());
    Sample sample;
    sample.image = Image(array_.height, array_.width, array_.channels);
    std::memcpy(sample.image.pixels.data(), array_.pixels.data() + index * image_bytes_,
                image_bytes_);
    sample.label = array_.labels[index];
    return sample;
  }

  std::string source(size_t index) const override {
    for (const RecordFile& file : array_.files)
      if (index >= file.first && index < file.first + file.count)
        return file.path + " record " + std::to_string(index - file.first);
    return array_.description + " sample " + std::to_string(index);
  }

  std::string description() const override { return array_.description; }

 private:
  ImageArray array_;
  size_t image_bytes_ = 0;
};

}  // namespace

DatasetPtr make_in_memory_dataset(ImageArray array) {
  return std::make_shared<InMemoryDataset>(std::move(array));
}

}  // namespace rddp::data
