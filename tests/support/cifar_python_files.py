#!/usr/bin/env python3
"""Writes small CIFAR-10 and CIFAR-100 data sets in the layouts resnet_ddp reads, all from the
same known images: the Python version as torchvision downloads it (folders and .tar.gz
archives) and the binary version. The Python files are written opcode by opcode as Python 2's
cPickle wrote the distributed ones (protocol 2: str as SHORT_BINSTRING/BINSTRING, the images a
numpy uint8 array rebuilt through numpy.core.multiarray._reconstruct with the pixels in one
BINSTRING, memo numbers from 1), since Python 3's pickle writes other opcodes for the same
objects. Writing needs only the standard library; --check needs numpy (and uses torchvision
where it imports) to prove that the files load as torchvision loads the real ones, and writes
Python 3 pickles of the same data, which resnet_ddp refuses.

    cifar_python_files.py OUT [--check]

OUT/
  cifar10-root/        cifar-10-batches-py/ and cifar-10-python.tar.gz (torchvision's root)
  cifar10-archive/     cifar-10-python.tar.gz alone
  cifar10-binary/      cifar-10-batches-bin/ (data_batch_1.bin ... test_batch.bin)
  cifar100-root/, cifar100-archive/, cifar100-binary/   the same for CIFAR-100
  cifar10-pax.tar.gz   the CIFAR-10 archive as Python's tarfile writes it (pax headers)
  bad/<case>/          inputs resnet_ddp must refuse (see write_bad_cases)
  python3/protocol-2/, python3/protocol-default/   (--check) the CIFAR-10 folder pickled by
                       Python 3 (cifar-10-batches-py/ in each)
"""
import gzip
import io
import os
import random
import struct
import sys
import tarfile

CIFAR10_PER_BATCH = 8
# Over 1000 images: the label lists take two APPENDS batches as cPickle writes them (the second
# a single APPEND), and the memo passes 255 (LONG_BINPUT).
CIFAR100_TRAIN = 1001
CIFAR100_TEST = 10
IMAGE_BYTES = 3072

CIFAR10_NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
                 "truck"]
CIFAR100_FINE = [f"fine_{k:02d}" for k in range(100)]
CIFAR100_COARSE = [f"coarse_{k:02d}" for k in range(20)]

# The members of the downloaded archives, in the order the archives hold them.
CIFAR10_MEMBERS = ["data_batch_4", "readme.html", "test_batch", "data_batch_3", "batches.meta",
                   "data_batch_2", "data_batch_5", "data_batch_1"]
CIFAR100_MEMBERS = ["file.txt~", "train", "test", "meta"]


class Py2Pickler:
    """Protocol 2 as Python 2's cPickle writes dicts, lists, str, int and numpy arrays. cPickle
    memoizes an object only when something else holds it too (put() skips a reference count
    below 2): the dict, its keys and values, list items of str, globals and REDUCE results are
    memoized; ints, str shorter than 2, and the tuples numpy's __reduce__ makes are not."""

    def __init__(self):
        self.out = bytearray(b"\x80\x02")  # PROTO 2
        self.memo = 0

    def put(self):
        self.memo += 1  # cPickle numbers from 1, pickle.py from 0
        if self.memo < 256:
            self.out += b"q" + bytes([self.memo])  # BINPUT
        else:
            self.out += b"r" + struct.pack("<I", self.memo)  # LONG_BINPUT

    def int(self, value):
        if 0 <= value < 256:
            self.out += b"K" + bytes([value])  # BININT1
        elif 0 <= value < 65536:
            self.out += b"M" + struct.pack("<H", value)  # BININT2
        else:
            self.out += b"J" + struct.pack("<i", value)  # BININT

    def str(self, value, memoize=True):
        data = value.encode("latin-1") if isinstance(value, str) else bytes(value)
        if len(data) < 256:
            self.out += b"U" + bytes([len(data)]) + data  # SHORT_BINSTRING
        else:
            self.out += b"T" + struct.pack("<i", len(data)) + data  # BINSTRING
        if memoize and len(data) >= 2:
            self.put()

    def list(self, items, save):
        self.out += b"]"  # EMPTY_LIST
        self.put()
        for start in range(0, len(items), 1000):  # cPickle's BATCHSIZE
            batch = items[start:start + 1000]
            if len(batch) == 1:
                save(batch[0])
                self.out += b"a"  # APPEND
            else:
                self.out += b"("  # MARK
                for item in batch:
                    save(item)
                self.out += b"e"  # APPENDS

    def uint8_array(self, rows, columns, pixels):
        """numpy's ndarray.__reduce__: _reconstruct(ndarray, (0,), 'b'), then BUILD with
        (1, shape, dtype, is_fortran, raw bytes); the dtype is dtype('u1', 0, 1) with the
        state (3, '|', None, None, None, -1, -1, 0)."""
        assert len(pixels) == rows * columns
        self.out += b"cnumpy.core.multiarray\n_reconstruct\n"
        self.put()
        self.out += b"cnumpy\nndarray\n"
        self.put()
        self.int(0)
        self.out += b"\x85"  # TUPLE1
        self.str("b")
        self.out += b"\x87R"  # TUPLE3, REDUCE
        self.put()
        self.out += b"("  # MARK
        self.int(1)
        self.int(rows)
        self.int(columns)
        self.out += b"\x86"  # TUPLE2
        self.out += b"cnumpy\ndtype\n"
        self.put()
        self.str("u1", memoize=False)
        self.int(0)
        self.int(1)
        self.out += b"\x87R"
        self.put()
        self.out += b"("
        self.int(3)
        self.str("|")
        self.out += b"NNN"  # NONE x3
        self.out += b"J" + struct.pack("<i", -1) + b"J" + struct.pack("<i", -1)
        self.int(0)
        self.out += b"tb"  # TUPLE, BUILD
        self.out += b"\x89"  # NEWFALSE
        self.str(pixels, memoize=False)
        self.out += b"tb"

    def dict(self, entries):
        """entries: (key, save) pairs, in the order the file holds them."""
        self.out += b"}"  # EMPTY_DICT
        self.put()
        self.out += b"("
        for key, save in entries:
            self.str(key)
            save()
        self.out += b"u"  # SETITEMS

    def finish(self):
        return bytes(self.out + b".")  # STOP


def batch_pickle(entries):
    """entries: (key, kind, value) with kind "str", "int", "ints", "strs" or "pixels"."""
    p = Py2Pickler()

    def saver(kind, value):
        if kind == "str":
            return lambda: p.str(value)
        if kind == "int":
            return lambda: p.int(value)
        if kind == "ints":
            return lambda: p.list(value, p.int)
        if kind == "strs":
            return lambda: p.list(value, p.str)
        if kind == "pixels":
            rows = len(value) // IMAGE_BYTES
            return lambda: p.uint8_array(rows, IMAGE_BYTES, value)
        raise ValueError(kind)

    p.dict([(key, saver(kind, value)) for key, kind, value in entries])
    return p.finish()


class Split:
    """Images as CIFAR stores them (3072 bytes: the R, G, B planes of 32x32) and labels."""

    def __init__(self, rng, count, classes, coarse=None):
        self.pixels = rng.randbytes(count * IMAGE_BYTES)
        self.labels = [rng.randrange(classes) for _ in range(count)]
        self.coarse = [label // 5 for label in self.labels] if coarse else None
        self.filenames = [f"image_{rng.randrange(10**6):06d}_s_{i:06d}.png" for i in range(count)]

    def image(self, i):
        return self.pixels[i * IMAGE_BYTES:(i + 1) * IMAGE_BYTES]


def cifar10_splits():
    rng = random.Random(10)
    return [Split(rng, CIFAR10_PER_BATCH, 10) for _ in range(6)]  # data_batch_1..5, test_batch


def cifar100_splits():
    rng = random.Random(100)
    return Split(rng, CIFAR100_TRAIN, 100, True), Split(rng, CIFAR100_TEST, 100, True)


def cifar10_python_files(splits, labels_key="labels"):
    names = [f"data_batch_{k}" for k in range(1, 6)] + ["test_batch"]
    files = {}
    for k, (name, split) in enumerate(zip(names, splits)):
        label = f"training batch {k + 1} of 5" if k < 5 else "testing batch 1 of 1"
        files[name] = batch_pickle([("batch_label", "str", label),
                                    (labels_key, "ints", split.labels),
                                    ("data", "pixels", split.pixels),
                                    ("filenames", "strs", split.filenames)])
    files["batches.meta"] = batch_pickle([("num_cases_per_batch", "int", len(splits[0].labels)),
                                          ("label_names", "strs", CIFAR10_NAMES),
                                          ("num_vis", "int", IMAGE_BYTES)])
    files["readme.html"] = b"<meta HTTP-EQUIV=\"REFRESH\" content=\"0; url=cifar.html\">\n"
    return files


def cifar100_python_files(train, test):
    files = {}
    for name, split, label in (("train", train, "training batch 1 of 1"),
                               ("test", test, "testing batch 1 of 1")):
        files[name] = batch_pickle([("filenames", "strs", split.filenames),
                                    ("batch_label", "str", label),
                                    ("fine_labels", "ints", split.labels),
                                    ("coarse_labels", "ints", split.coarse),
                                    ("data", "pixels", split.pixels)])
    files["meta"] = batch_pickle([("fine_label_names", "strs", CIFAR100_FINE),
                                  ("coarse_label_names", "strs", CIFAR100_COARSE)])
    files["file.txt~"] = b""
    return files


def cifar10_binary_files(splits):
    names = [f"data_batch_{k}.bin" for k in range(1, 6)] + ["test_batch.bin"]
    return {name: b"".join(bytes([split.labels[i]]) + split.image(i)
                           for i in range(len(split.labels)))
            for name, split in zip(names, splits)}


def cifar100_binary_files(train, test):
    return {name: b"".join(bytes([split.coarse[i], split.labels[i]]) + split.image(i)
                           for i in range(len(split.labels)))
            for name, split in (("train.bin", train), ("test.bin", test))}


def write_folder(directory, files):
    os.makedirs(directory, exist_ok=True)
    for name, data in files.items():
        with open(os.path.join(directory, name), "wb") as out:
            out.write(data)


def tar(folder, files, order, tar_format=tarfile.GNU_FORMAT):
    """The archive as the download holds it: the folder, then its files in `order`."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tar_format) as archive:
        entry = tarfile.TarInfo(folder)
        entry.type, entry.mode, entry.mtime = tarfile.DIRTYPE, 0o755, 1244000000
        archive.addfile(entry)
        for name in order:
            entry = tarfile.TarInfo(f"{folder}/{name}")
            entry.size, entry.mode, entry.mtime = len(files[name]), 0o644, 1244000000
            archive.addfile(entry, io.BytesIO(files[name]))
    return raw.getvalue()


def tar_gz(folder, files, order, tar_format=tarfile.GNU_FORMAT):
    return gzip.compress(tar(folder, files, order, tar_format), compresslevel=6, mtime=0)


def write_bytes(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as out:
        out.write(data)


def write_bad_cases(out, c10_files, c10_splits):
    """Inputs to refuse, each in bad/<case>/: folders are cifar-10-batches-py/ copies with one
    file changed; archives are cifar-10-python.tar.gz."""
    archive = tar_gz("cifar-10-batches-py", c10_files, CIFAR10_MEMBERS)

    def folder_with(case, name, data):
        changed = dict(c10_files)
        changed[name] = data
        write_folder(os.path.join(out, "bad", case, "cifar-10-batches-py"), changed)

    first = c10_splits[0]
    # data_batch_1 cut short inside its pixels.
    folder_with("truncated-member", "data_batch_1", c10_files["data_batch_1"][:-2000])
    # Labels past the class count, fewer labels than images, and pixels of another shape.
    folder_with("label-out-of-range", "data_batch_2", batch_pickle(
        [("labels", "ints", [10] + first.labels[1:]), ("data", "pixels", first.pixels)]))
    folder_with("fewer-labels-than-images", "data_batch_3", batch_pickle(
        [("labels", "ints", first.labels[:-1]), ("data", "pixels", first.pixels)]))
    p = Py2Pickler()
    p.dict([("labels", lambda: p.list(first.labels, p.int)),
            ("data", lambda: p.uint8_array(len(first.labels) * 3, 1024, first.pixels))])
    folder_with("images-of-1024-bytes", "data_batch_4", p.finish())
    # A batch of 7 images where batches.meta says num_cases_per_batch is 8.
    seven = first.pixels[:7 * IMAGE_BYTES]
    folder_with("batch-smaller-than-meta-says", "data_batch_5", batch_pickle(
        [("labels", "ints", first.labels[:7]), ("data", "pixels", seven)]))
    # The archive cut in half, without data_batch_3, and with bytes of its stream changed.
    write_bytes(os.path.join(out, "bad", "truncated-archive", "cifar-10-python.tar.gz"),
                archive[:len(archive) // 2])
    missing = [name for name in CIFAR10_MEMBERS if name != "data_batch_3"]
    write_bytes(os.path.join(out, "bad", "member-missing", "cifar-10-python.tar.gz"),
                tar_gz("cifar-10-batches-py", c10_files, missing))
    corrupt = bytearray(archive)
    for at in range(len(corrupt) // 2, len(corrupt) // 2 + 64):
        corrupt[at] ^= 0x5A
    write_bytes(os.path.join(out, "bad", "corrupt-gzip", "cifar-10-python.tar.gz"), bytes(corrupt))


def write_all(out):
    c10 = cifar10_splits()
    c100_train, c100_test = cifar100_splits()
    c10_files = cifar10_python_files(c10)
    c100_files = cifar100_python_files(c100_train, c100_test)
    c10_archive = tar_gz("cifar-10-batches-py", c10_files, CIFAR10_MEMBERS)
    c100_archive = tar_gz("cifar-100-python", c100_files, CIFAR100_MEMBERS)

    write_folder(os.path.join(out, "cifar10-root", "cifar-10-batches-py"), c10_files)
    write_bytes(os.path.join(out, "cifar10-root", "cifar-10-python.tar.gz"), c10_archive)
    write_bytes(os.path.join(out, "cifar10-archive", "cifar-10-python.tar.gz"), c10_archive)
    write_folder(os.path.join(out, "cifar10-binary", "cifar-10-batches-bin"),
                 cifar10_binary_files(c10))
    write_folder(os.path.join(out, "cifar100-root", "cifar-100-python"), c100_files)
    write_bytes(os.path.join(out, "cifar100-root", "cifar-100-python.tar.gz"), c100_archive)
    write_bytes(os.path.join(out, "cifar100-archive", "cifar-100-python.tar.gz"), c100_archive)
    write_folder(os.path.join(out, "cifar100-binary", "cifar-100-binary"),
                 cifar100_binary_files(c100_train, c100_test))
    write_bytes(os.path.join(out, "cifar10-pax.tar.gz"),
                tar_gz("cifar-10-batches-py", c10_files, CIFAR10_MEMBERS, tarfile.PAX_FORMAT))
    write_bad_cases(out, c10_files, c10)
    return c10, (c100_train, c100_test)


def check(out, c10, c100):
    """Loads the files as torchvision does (pickle.load with encoding "latin1") and with
    encoding "bytes" (as the CIFAR page shows), compares them with the images they were
    written from, and reads them through torchvision's CIFAR10/CIFAR100 where it imports."""
    import pickle

    import numpy as np

    def expect(condition, what):
        if not condition:
            sys.exit(f"cifar_python_files.py --check: {what}")

    def load(path, encoding):
        with open(path, "rb") as f:
            return pickle.load(f, encoding=encoding)

    def key(name, encoding):
        return name.encode() if encoding == "bytes" else name

    def check_batch(path, split, labels_key):
        for encoding in ("latin1", "bytes"):
            entry = load(path, encoding)
            data = entry[key("data", encoding)]
            expect(isinstance(data, np.ndarray) and data.dtype == np.uint8
                   and data.shape == (len(split.labels), IMAGE_BYTES),
                   f"{path}: data is not a uint8 array of {len(split.labels)}x{IMAGE_BYTES}")
            expect(data.tobytes() == split.pixels, f"{path}: other pixels than written")
            expect(entry[key(labels_key, encoding)] == split.labels, f"{path}: other labels")
            if split.coarse:
                expect(entry[key("coarse_labels", encoding)] == split.coarse,
                       f"{path}: other coarse labels")
            names = [n.decode() if encoding == "bytes" else n
                     for n in entry[key("filenames", encoding)]]
            expect(names == split.filenames, f"{path}: other file names")

    folder10 = os.path.join(out, "cifar10-root", "cifar-10-batches-py")
    for k, split in enumerate(c10):
        name = f"data_batch_{k + 1}" if k < 5 else "test_batch"
        check_batch(os.path.join(folder10, name), split, "labels")
    meta = load(os.path.join(folder10, "batches.meta"), "latin1")
    expect(meta == {"num_cases_per_batch": CIFAR10_PER_BATCH, "label_names": CIFAR10_NAMES,
                    "num_vis": IMAGE_BYTES}, "batches.meta differs")
    folder100 = os.path.join(out, "cifar100-root", "cifar-100-python")
    check_batch(os.path.join(folder100, "train"), c100[0], "fine_labels")
    check_batch(os.path.join(folder100, "test"), c100[1], "fine_labels")
    meta = load(os.path.join(folder100, "meta"), "latin1")
    expect(meta == {"fine_label_names": CIFAR100_FINE, "coarse_label_names": CIFAR100_COARSE},
           "meta differs")

    # The archives hold the folder's files byte for byte.
    for archive, folder in (("cifar10-root/cifar-10-python.tar.gz", folder10),
                            ("cifar100-root/cifar-100-python.tar.gz", folder100),
                            ("cifar10-pax.tar.gz", folder10)):
        with tarfile.open(os.path.join(out, archive)) as opened:
            for member in opened.getmembers():
                if member.isfile():
                    with open(os.path.join(os.path.dirname(folder), member.name), "rb") as f:
                        expect(opened.extractfile(member).read() == f.read(),
                               f"{archive}: {member.name} differs from the folder's")
    checked = "pickle.load"
    try:
        import torchvision
        from torchvision.datasets import cifar
    except ImportError:
        torchvision = None
    if torchvision is not None:
        # Its MD5 checks know only the real files' sums.
        cifar.check_integrity = lambda *args, **kwargs: True
        for dataset, root, splits in ((cifar.CIFAR10, "cifar10-root", (c10[:5], c10[5:])),
                                      (cifar.CIFAR100, "cifar100-root", ([c100[0]], [c100[1]]))):
            for train, parts in zip((True, False), splits):
                loaded = dataset(os.path.join(out, root), train=train)
                planes = np.frombuffer(b"".join(s.pixels for s in parts), np.uint8)
                hwc = planes.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
                expect(np.array_equal(loaded.data, hwc), f"torchvision reads other images")
                expect(loaded.targets == sum((s.labels for s in parts), []),
                       f"torchvision reads other labels")
            expect(len(loaded.classes) in (10, 100), "torchvision reads no class names")
        checked += f" and torchvision {torchvision.__version__}'s CIFAR10/CIFAR100"
    write_python3_pickles(out, c10)
    print(f"cifar_python_files.py: the files load with {checked} as written")


def write_python3_pickles(out, c10):
    """The CIFAR-10 folder re-saved by Python 3's pickle.dump (protocol 2 and the default), as
    someone who loaded the download and saved it again would have it."""
    import pickle

    import numpy as np
    for protocol, name in ((2, "protocol-2"), (pickle.DEFAULT_PROTOCOL, "protocol-default")):
        folder = os.path.join(out, "python3", name, "cifar-10-batches-py")
        os.makedirs(folder, exist_ok=True)
        for k, split in enumerate(c10):
            name = f"data_batch_{k + 1}" if k < 5 else "test_batch"
            entry = {"batch_label": "batch", "labels": split.labels,
                     "data": np.frombuffer(split.pixels, np.uint8).reshape(-1, IMAGE_BYTES).copy(),
                     "filenames": split.filenames}
            with open(os.path.join(folder, name), "wb") as f:
                pickle.dump(entry, f, protocol=protocol)
        with open(os.path.join(folder, "batches.meta"), "wb") as f:
            pickle.dump({"num_cases_per_batch": CIFAR10_PER_BATCH, "label_names": CIFAR10_NAMES,
                         "num_vis": IMAGE_BYTES}, f, protocol=protocol)


def main():
    arguments = [a for a in sys.argv[1:] if a != "--check"]
    if len(arguments) != 1:
        sys.exit(__doc__)
    c10, c100 = write_all(arguments[0])
    if "--check" in sys.argv[1:]:
        check(arguments[0], c10, c100)


if __name__ == "__main__":
    main()
