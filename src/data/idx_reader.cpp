// The idx format of MNIST (http://yann.lecun.com/exdb/mnist/) and of the data sets that copy
// its layout (Fashion-MNIST, KMNIST): a big-endian header, magic 0x00000803 for a 3-d ubyte
// array of images or 0x00000801 for a 1-d ubyte array of labels, then one int32 per
// dimension, then the bytes. Files may be gzip-compressed as distributed.
#include <algorithm>
#include <climits>
#include <new>
#include <cstdio>
#include <string>
#include <vector>

#include "resnet_ddp/data/file_io.h"
#include "resnet_ddp/data/in_memory_dataset.h"
#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/data/regular_file.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/printable.h"

namespace rddp::data {

namespace {

constexpr uint32_t kImagesMagic = 0x00000803;
constexpr uint32_t kLabelsMagic = 0x00000801;

uint32_t big_endian_u32(const uint8_t* bytes) {
  return uint32_t(bytes[0]) << 24 | uint32_t(bytes[1]) << 16 | uint32_t(bytes[2]) << 8 |
         uint32_t(bytes[3]);
}

// dir/name.gz, dir/name, or the same under dir/raw (where torchvision downloads them). Where
// none is a regular file but one of the names is taken, that one is named with what it is.
std::string find_idx_file(const std::string& dir, const std::string& name) {
  std::string taken;
  for (const std::string& folder : {dir, join_path(dir, "raw")})
    for (const char* suffix : {".gz", ""}) {
      const std::string path = join_path(folder, name + suffix);
      if (is_regular_file(path)) return path;
      if (taken.empty() && path_exists(path)) taken = path;
    }
  if (!taken.empty())
    fail("idx file ", printable(taken), " is ", non_regular_kind(taken), ", not a regular file: "
         "replace it with the file itself (train-images-idx3-ubyte and the other three, plain "
         "or gzip)");
  if (!is_directory(dir)) fail("data directory ", dir, " does not exist");
  fail("idx file ", name, "[.gz] is missing from ", dir, " (and from ", join_path(dir, "raw"),
       "): an idx data set needs train-images-idx3-ubyte, train-labels-idx1-ubyte, "
       "t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, plain or gzip");
}

struct IdxArray {
  std::string path;
  std::vector<uint8_t> data;  // the bytes after the header
  std::vector<uint32_t> dims;
};

std::string shape_of(const std::vector<uint32_t>& dims) {
  std::string shape;
  for (uint32_t dim : dims) shape += (shape.empty() ? "" : "x") + std::to_string(dim);
  return shape;
}

// The header first; then no more data than its dimensions promise, so that a small .gz that
// inflates to gigabytes is refused once it passes that size, not after inflating it all.
IdxArray read_idx(const std::string& path, uint32_t magic, size_t rank, const char* what) {
  MaybeGzipReader in(path);
  const std::string shown = printable(path);
  const size_t header = 4 + 4 * rank;
  uint8_t head[16];
  const size_t got = in.read(head, header);
  if (got >= 4) {
    const uint32_t found = big_endian_u32(head);
    if (found != magic) {
      char text[64];
      std::snprintf(text, sizeof text, "0x%08x where idx %s have 0x%08x", found, what, magic);
      fail(shown, " has magic number ", text, ": it is not an idx file of ", what,
           " (are the images and labels files swapped?)");
    }
  }
  if (got < header)
    fail(shown, " is ", got, " bytes, too short for an idx ", what,
         " header: the file is truncated; download it again");
  IdxArray array{path, {}, {}};
  // Three 32-bit dimensions can multiply past 64 bits, and wrap to the size of the data.
  size_t elements = 1;
  bool overflow = false;
  for (size_t d = 0; d < rank; ++d) {
    array.dims.push_back(big_endian_u32(head + 4 * d + 4));
    overflow |= __builtin_mul_overflow(elements, size_t(array.dims.back()), &elements);
  }
  if (overflow)
    fail(shown, "'s header says its data is ", shape_of(array.dims), " bytes, more than any file "
         "holds: the file is damaged; download it again");
  auto refuse_length = [&](uint64_t data_bytes, bool more) {
    fail(shown, " holds ", more ? "more than " : "", data_bytes, " bytes of data but its header "
         "says ", shape_of(array.dims), " = ", elements,
         ": the file is truncated or damaged; download it again");
  };
  // A plain file's size is known before anything is read.
  if (!in.compressed() && in.file_size() != header + elements)
    refuse_length(in.file_size() - header, false);
  try {
    size_t have = 0;
    while (have < elements) {
      // A .gz's data grows as it comes, up to the promised size, so that a header promising
      // more than the file holds costs no more memory than what it does hold. A plain file's
      // size matches the header's (checked above): one allocation.
      array.data.resize(in.compressed()
                            ? std::min(elements, std::max<size_t>(size_t(1) << 20, 2 * have))
                            : elements);
      const size_t want = array.data.size() - have;
      const size_t more = in.read(array.data.data() + have, want);
      have += more;
      if (more < want) refuse_length(have, false);
    }
    uint8_t extra;
    if (in.read(&extra, 1) != 0) refuse_length(elements, true);
  } catch (const std::bad_alloc&) {
    fail("not enough memory to read ", shown, ": its header promises ", elements,
         " bytes of data (", shape_of(array.dims), "); free memory, or check that this is the "
         "file you meant");
  }
  return array;
}

ImageArray read_split(const std::string& dir, const std::string& prefix, const char* split) {
  IdxArray images = read_idx(find_idx_file(dir, prefix + "-images-idx3-ubyte"),
                                   kImagesMagic, 3, "images");
  const IdxArray labels = read_idx(find_idx_file(dir, prefix + "-labels-idx1-ubyte"),
                                   kLabelsMagic, 1, "labels");
  if (images.dims[0] != labels.dims[0])
    fail(images.path, " holds ", images.dims[0], " images but ", labels.path, " holds ",
         labels.dims[0], " labels: the two files must come from the same download");
  if (images.dims[0] == 0) fail(images.path, " holds no images");
  if (images.dims[1] == 0 || images.dims[2] == 0 || images.dims[1] > uint32_t(INT_MAX) ||
      images.dims[2] > uint32_t(INT_MAX))
    fail(images.path, " holds images of ", images.dims[1], "x", images.dims[2],
         " pixels: the file is damaged; download it again");
  ImageArray array;
  array.height = int(images.dims[1]);
  array.width = int(images.dims[2]);
  array.channels = 1;
  array.pixels = std::move(images.data);
  array.labels.assign(labels.data.begin(), labels.data.end());
  array.files.push_back({images.path, 0, images.dims[0]});
  array.description = std::string("idx ") + split + " (" + dir + ", " +
                      std::to_string(images.dims[0]) + " images)";
  return array;
}

}  // namespace

Splits open_idx(const std::string& dir) {
  ImageArray train = read_split(dir, "train", "train");
  ImageArray val = read_split(dir, "t10k", "test");
  if (train.height != val.height || train.width != val.width)
    fail(train.files[0].path, " has ", train.height, "x", train.width, " images but ",
         val.files[0].path, " has ", val.height, "x", val.width, ": they are not one data set");
  int32_t max_label = 0;
  for (int32_t label : train.labels) max_label = std::max(max_label, label);
  train.num_classes = val.num_classes = max_label + 1;
  for (size_t i = 0; i < val.labels.size(); ++i)
    if (val.labels[i] > max_label)
      fail(find_idx_file(dir, "t10k-labels-idx1-ubyte"), " label ", i, " is ", val.labels[i],
           ", out of the training labels' range 0..", max_label,
           ": the test files belong to another data set");
  return {make_in_memory_dataset(std::move(train)), make_in_memory_dataset(std::move(val))};
}

}  // namespace rddp::data
