// CIFAR's Python version as torchvision downloads it, folder and .tar.gz, against the binary
// version of the same images: tests/support/cifar_python_files.py writes both, the pickles
// opcode for opcode as Python 2's cPickle wrote the real ones. Then the pickle and tar readers
// on inputs they must refuse.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "resnet_ddp/data/data_config.h"
#include "resnet_ddp/data/dataset_kind.h"
#include "resnet_ddp/data/python2_pickle.h"
#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/data/tar_archive.h"
#include "resnet_ddp/error.h"
#include "support/error_text.h"
#include "support/scratch_dir.h"

using namespace rddp;
using namespace std::string_literals;
using namespace rddp::data;
namespace fs = std::filesystem;
using testing::error_of;

namespace {

// The generator's output, written once per run of the test program.
std::string generated(const std::string& relative = "") {
  static const fs::path dir = [] {
    const fs::path out = testing::fresh_dir("cifar_python", "files");
    const std::string command = "python3 " RDDP_SOURCE_DIR
                                "/tests/support/cifar_python_files.py " + out.string();
    if (std::system(command.c_str()) != 0) FAIL("cannot run ", command);
    return out;
  }();
  return relative.empty() ? dir.string() : (dir / relative).string();
}

void write_text(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  REQUIRE(out.good());
}

// Every sample of both splits, in order: the same pixels and the same label.
void check_same_samples(const Splits& got, const Splits& expected) {
  for (const auto& [a, b] : {std::pair{got.train, expected.train}, {got.val, expected.val}}) {
    REQUIRE(a != nullptr);
    REQUIRE(a->size() == b->size());
    CHECK(a->num_classes() == b->num_classes());
    CHECK(a->height() == 32);
    CHECK(a->width() == 32);
    CHECK(a->channels() == 3);
    size_t differing = 0;
    for (size_t i = 0; i < a->size(); ++i) {
      const Sample x = a->get(i), y = b->get(i);
      if (x.label != y.label || x.image.pixels != y.image.pixels) ++differing;
    }
    CHECK(differing == 0);
  }
}

}  // namespace

TEST_CASE("CIFAR-10 as torchvision downloads it gives the binary version's samples") {
  const Splits binary = open_cifar10(generated("cifar10-binary"));
  REQUIRE(binary.train->size() == 40);  // five batches of 8
  REQUIRE(binary.val->size() == 8);
  // torchvision's root (folder and archive: the folder is read), the folder itself, a folder
  // holding only the archive, the archive, and the archive as Python's tarfile writes it.
  for (const char* path : {"cifar10-root", "cifar10-root/cifar-10-batches-py", "cifar10-archive",
                           "cifar10-archive/cifar-10-python.tar.gz", "cifar10-pax.tar.gz"}) {
    CAPTURE(path);
    check_same_samples(open_cifar10(generated(path)), binary);
    CHECK(detect_dataset_kind(generated(path)) == DatasetKind::cifar10);
  }
  CHECK(open_cifar10(generated("cifar10-root")).train->source(9) ==
        generated("cifar10-root/cifar-10-batches-py/data_batch_2") + " record 1");
  CHECK(open_cifar10(generated("cifar10-archive")).val->source(3) ==
        generated("cifar10-archive/cifar-10-python.tar.gz") +
            " member cifar-10-batches-py/test_batch record 3");

  // Through the data set factory, detected and named, as --data and --dataset give it.
  for (DatasetKind kind : {DatasetKind::automatic, DatasetKind::cifar10}) {
    DataConfig config;
    config.path = generated("cifar10-archive/cifar-10-python.tar.gz");
    config.kind = kind;
    const OpenedData data = open_data(config);
    CHECK(data.kind == DatasetKind::cifar10);
    CHECK(data.normalization.name == "cifar10");
    check_same_samples({data.train, data.val}, binary);
  }
}

TEST_CASE("CIFAR-100 as torchvision downloads it gives the binary version's fine labels") {
  const Splits binary = open_cifar100(generated("cifar100-binary"));
  REQUIRE(binary.train->size() == 1001);
  REQUIRE(binary.val->size() == 10);
  CHECK(binary.train->num_classes() == 100);
  for (const char* path : {"cifar100-root", "cifar100-root/cifar-100-python", "cifar100-archive",
                           "cifar100-archive/cifar-100-python.tar.gz"}) {
    CAPTURE(path);
    check_same_samples(open_cifar100(generated(path)), binary);
    CHECK(detect_dataset_kind(generated(path)) == DatasetKind::cifar100);
  }
  DataConfig config;
  config.path = generated("cifar100-archive");
  config.kind = DatasetKind::cifar100;
  CHECK(open_data(config).normalization.name == "cifar100");
}

TEST_CASE("an archive of another name is told apart by its first entry") {
  const fs::path dir = testing::fresh_dir("cifar_python", "renamed");
  fs::copy_file(generated("cifar10-archive/cifar-10-python.tar.gz"), dir / "c10.tgz");
  fs::copy_file(generated("cifar100-archive/cifar-100-python.tar.gz"), dir / "c100.tgz");
  CHECK(detect_dataset_kind((dir / "c10.tgz").string()) == DatasetKind::cifar10);
  CHECK(detect_dataset_kind((dir / "c100.tgz").string()) == DatasetKind::cifar100);
  CHECK(first_tar_entry((dir / "c10.tgz").string()) == std::string("cifar-10-batches-py/"));
  CHECK(open_cifar10((dir / "c10.tgz").string()).train->size() == 40);
  // Neither a CIFAR archive nor a tar archive at all.
  write_text((dir / "notes.txt").string(), "not a data set\n");
  CHECK(first_tar_entry((dir / "notes.txt").string()) == std::nullopt);
  const std::string message = error_of([&] { detect_dataset_kind((dir / "notes.txt").string()); });
  CHECK(message.find("notes.txt is a file") != std::string::npos);
  CHECK(message.find("cifar-10-python.tar.gz and cifar-100-python.tar.gz") != std::string::npos);
}

TEST_CASE("the message for a folder in no known format names the CIFAR layouts") {
  const fs::path empty = testing::fresh_dir("cifar_python", "empty");
  const std::string message = error_of([&] { detect_dataset_kind(empty.string()); });
  for (const char* part : {"looked for data_batch_1.bin (CIFAR-10 binary, also in "
                           "cifar-10-batches-bin/)",
                           "data_batch_1 (CIFAR-10 as torchvision downloads it, also in "
                           "cifar-10-batches-py/) and cifar-10-python.tar.gz (read in place)",
                           "train and meta (CIFAR-100 as torchvision downloads it, also in "
                           "cifar-100-python/) and cifar-100-python.tar.gz",
                           "or to a CIFAR .tar.gz"}) {
    CAPTURE(part);
    CHECK(message.find(part) != std::string::npos);
  }
  const std::string direct = error_of([&] { open_cifar100(empty.string()); });
  CHECK(direct.find("no CIFAR-100 files in") != std::string::npos);
  CHECK(direct.find("Download cifar-100-python.tar.gz") != std::string::npos);
}

TEST_CASE("damaged and incomplete downloads are refused, naming the file and the fix") {
  struct Case {
    const char* dir;
    std::vector<const char*> parts;
  };
  const std::string advice = "this is not CIFAR-10's Python version as downloaded. Use the "
                             "download itself (cifar-10-python.tar.gz";
  const Case cases[] = {
      {"truncated-member",
       {"cifar-10-batches-py/data_batch_1: byte ", "bytes short of the", "truncated",
        advice.c_str()}},
      {"label-out-of-range",
       {"cifar-10-batches-py/data_batch_2: 'labels' item 0 is 10, not a label in 0..9",
        advice.c_str()}},
      {"fewer-labels-than-images",
       {"data_batch_3: 'labels' holds 7 labels for 8 images", advice.c_str()}},
      {"images-of-1024-bytes",
       {"data_batch_4: 'data' is an array of shape (24, 1024), not (N, 3072)"}},
      {"batch-smaller-than-meta-says",
       {"data_batch_5: 'data' holds 7 images where batches.meta says a batch holds 8"}},
      {"truncated-archive",
       {"cifar-10-python.tar.gz: unexpected end of file", "damaged or truncated gzip file"}},
      {"member-missing",
       {"cifar-10-python.tar.gz holds no cifar-10-batches-py/data_batch_3: the archive is "
        "incomplete", "download it again"}},
      {"corrupt-gzip",
       {"cannot read ", "cifar-10-python.tar.gz: ", "(a damaged or truncated gzip"}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.dir);
    const std::string message = error_of([&] { open_cifar10(generated("bad/") + c.dir); });
    CAPTURE(message);
    for (const char* part : c.parts) CHECK(message.find(part) != std::string::npos);
  }
  // A file of the folder missing.
  const fs::path dir = testing::fresh_dir("cifar_python", "missing") / "cifar-10-batches-py";
  fs::copy(generated("cifar10-root/cifar-10-batches-py"), dir);
  fs::remove(dir / "test_batch");
  CHECK(error_of([&] { open_cifar10(dir.string()); })
            .find("test_batch is missing: unpack all of cifar-10-python.tar.gz") !=
        std::string::npos);
  // batches.meta of CIFAR-100's 100 names where CIFAR-10's 10 belong.
  fs::copy_file(generated("cifar100-root/cifar-100-python/meta"), dir / "batches.meta",
                fs::copy_options::overwrite_existing);
  fs::copy_file(generated("cifar10-root/cifar-10-batches-py/data_batch_1"), dir / "test_batch");
  CHECK(error_of([&] { open_cifar10(dir.string()); })
            .find("batches.meta: 'label_names' is not a list of 10 class names") !=
        std::string::npos);
}

namespace {

py2pickle::ValuePtr read_pickle(const std::string& bytes) {
  return py2pickle::read_python2_pickle(reinterpret_cast<const uint8_t*>(bytes.data()),
                                        bytes.size(), "test.pkl");
}

std::string pickle_error(const std::string& bytes) {
  return error_of([&] { read_pickle(bytes); });
}

// A string as Python 2 pickles it: SHORT_BINSTRING.
std::string str(const std::string& text) {
  return "U" + std::string(1, char(text.size())) + text;
}

}  // namespace

TEST_CASE("the pickle reader: memo references, integers, and Python 2's own forms") {
  // {'names': ['cat', <memo 2: 'cat'>], 'n': 300, 'big': 70000, 'neg': -2 (LONG1), 'ok': True}
  const std::string bytes = std::string("\x80\x02}q\x01(") + str("names") + "q\x02]q\x03(" +
                            str("cat") + "q\x04h\x04" + "e" + str("n") + "M,\x01" + str("big") +
                            "Jp\x11\x01\x00"s + str("neg") + "\x8a\x01\xfe" + str("ok") + "\x88u.";
  const py2pickle::ValuePtr root = read_pickle(bytes);
  REQUIRE(root->type == py2pickle::Type::dict);
  const py2pickle::Value* names = py2pickle::dict_get(*root, "names");
  REQUIRE(names != nullptr);
  REQUIRE(names->items.size() == 2);
  CHECK(names->items[0] == names->items[1]);  // the same object, as Python would have it
  CHECK(names->items[1]->bytes == "cat");
  CHECK(py2pickle::dict_get(*root, "n")->integer == 300);
  CHECK(py2pickle::dict_get(*root, "big")->integer == 70000);
  CHECK(py2pickle::dict_get(*root, "neg")->integer == -2);
  CHECK(py2pickle::dict_get(*root, "ok")->type == py2pickle::Type::boolean);
  CHECK(py2pickle::dict_get(*root, "missing") == nullptr);
}

TEST_CASE("the pickle reader refuses what Python 2's pickle of CIFAR never holds") {
  struct Case {
    std::string bytes;
    const char* part;
  };
  const Case cases[] = {
      // Python 3: protocol 4 with FRAME; protocol 2 with str as BINUNICODE; bytes as _codecs.
      {"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}"s,
       "written by Python 3's pickle (PROTO 4 at byte 0), not by Python 2's"},
      {"\x80\x02}q\x00X\x04\x00\x00\x00" "data"s,
       "written by Python 3's pickle (BINUNICODE at byte 5)"},
      {"\x80\x02" "c_codecs\nencode\n", "written by Python 3's pickle (GLOBAL _codecs.encode"},
      // Protocol 0, as Python 2's pickle wrote by default.
      {"(dp0\n", "byte 0 is 0x28, not the PROTO opcode"},
      // Lengths beyond the input: refused before anything is made of them.
      {"\x80\x02T\xff\xff\xff\x7f"s, "bytes short of the 2147483647"},
      {"\x80\x02T\xff\xff\xff\xff"s, "a string of negative length -1"},
      {"\x80\x02j\xff\xff\xff\x7f", "memo entry 2147483647 was never stored"},
      {"\x80\x02\x8a\x09"s, "an integer of 9 bytes"},
      // Code a pickle could run, and calls numpy's pickle never makes.
      {"\x80\x02" "cos\nsystem\n", "GLOBAL os.system: a CIFAR batch names no such object"},
      {"\x80\x02" "cnumpy\nndarray\n)R", "other than the three arguments"},
      {"\x80\x02" "cnumpy\ndtype\n" + str("u1") + "K\x00K\x01\x87R)b"s,
       "a numpy dtype whose state is not that of a plain number type"},
      // A list put into itself; values nested deeper than CIFAR's.
      {"\x80\x02]q\x01h\x01" "a.", "a list is appended to itself"},
      {"\x80\x02" + std::string(20, ']') + std::string(19, 'a') + ".", "nested more than 16"},
      // Structure: nothing to pop, no MARK, a missing STOP, bytes after it.
      {"\x80\x02" "a", "takes a value from an empty stack"},
      {"\x80\x02" "]e", "needs a MARK"},
      {"\x80\x02]", "ends before its STOP opcode"},
      {"\x80\x02]..", "STOP is followed by 1 more bytes"},
      {"\x80\x02}K\x01K\x02s.", "a dict key that is not a str"},
      {"\x80\x02\x81", "opcode 0x81 is not one that Python 2's pickle of a CIFAR batch holds"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.bytes);
    const std::string message = pickle_error(c.bytes);
    CAPTURE(message);
    CHECK(message.rfind("test.pkl: ", 0) == 0);
    CHECK(message.find(c.part) != std::string::npos);
  }
}

TEST_CASE("numpy arrays: only uint8 of the size their shape says") {
  // numpy's ndarray.__reduce__ as Python 2 pickles it, with `descr`, `shape` and `data`.
  auto array = [](const std::string& descr, const std::string& shape, const std::string& data) {
    return "\x80\x02" "cnumpy.core.multiarray\n_reconstruct\nq\x01" "cnumpy\nndarray\n"
           "q\x02K\x00\x85U\x01" "b\x87Rq\x03(K\x01"s +
           shape + "cnumpy\ndtype\nq\x04" + str(descr) + "K\x00K\x01\x87Rq\x05(K\x03U\x01|NNN"s +
           "J\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb\x89"s + str(data) + "tb.";
  };
  const std::string good_pickle = array("u1", "K\x02K\x03\x86", "abcdef");  // the result points into it
  const py2pickle::ValuePtr good = read_pickle(good_pickle);
  REQUIRE(good->type == py2pickle::Type::array);
  CHECK(good->built);
  CHECK(good->shape == std::vector<int64_t>{2, 3});
  CHECK(good->bytes == "abcdef");
  CHECK(pickle_error(array("f8", "K\x01\x85", "abcdefgh"))
            .find("a numpy array of dtype 'f8': CIFAR's images are uint8") != std::string::npos);
  CHECK(pickle_error(array("u1", "K\x02K\x03\x86", "abcde"))
            .find("whose shape needs 6 bytes holds 5") != std::string::npos);
  // Dimensions whose product overflows 64 bits are no way around the check.
  std::string huge = "(";
  for (int i = 0; i < 4; ++i) huge += "J\xff\xff\xff\x7f";
  CHECK(pickle_error(array("u1", huge + "t", "abcdef"))
            .find("whose shape needs more than 2^64 bytes holds 6") != std::string::npos);
}
