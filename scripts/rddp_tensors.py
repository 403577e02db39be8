"""Reads and writes resnet_ddp tensor files (weights and checkpoints) with numpy alone.

The format is described byte by byte in docs/file_format.md; src/tensor_file.cpp is the C++
side, and both write byte-identical files for the same contents. The model spec helpers at the
end describe the ResNet that a weights file holds, under torchvision's state_dict names.

    import rddp_tensors
    f = rddp_tensors.read("weights.rddp")
    f.metadata["model.stem"], f.tensors["conv1.weight"].shape, f.dtypes["conv1.weight"]
    rddp_tensors.write("copy.rddp", f.tensors, f.metadata, f.dtypes)
"""

import dataclasses
import os
import struct
import zlib

import numpy as np

MAGIC = b"RDDPTNSR"
END_MARKER = b"RDDPEND\0"
VERSION = 1
MAX_NAME_BYTES = 4096
MAX_DIMS = 32

# dtype code -> (name, numpy dtype). numpy has no bfloat16, so bf16 tensors are carried as
# their uint16 bit patterns, marked "bf16" in TensorFile.dtypes.
DTYPES = {
    1: ("f32", np.dtype("<f4")),
    2: ("f64", np.dtype("<f8")),
    3: ("i64", np.dtype("<i8")),
    4: ("i32", np.dtype("<i4")),
    5: ("u8", np.dtype("u1")),
    6: ("bf16", np.dtype("<u2")),
    7: ("f16", np.dtype("<f2")),
}
CODE_OF_NAME = {name: code for code, (name, _) in DTYPES.items()}
NAME_OF_NUMPY = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64",
                 np.dtype(np.int64): "i64", np.dtype(np.int32): "i32",
                 np.dtype(np.uint8): "u8", np.dtype(np.float16): "f16"}


class FormatError(Exception):
    """A file that is not a valid tensor file, or contents that cannot be written as one."""


@dataclasses.dataclass
class TensorFile:
    metadata: dict  # str -> str
    tensors: dict   # name -> numpy array, in file order
    dtypes: dict    # name -> dtype name as stored ("f32", "bf16", ...)


def _foreign_file_advice(head):
    if head.startswith(b"PK\x03\x04"):
        return ("it is a zip archive, as torch.save writes .pth/.pt files: convert it with "
                "scripts/torchvision_to_resnet_ddp.py")
    if head[:1] == b"\x80":
        return ("it looks like a Python pickle (an old-style torch.save file): convert it with "
                "scripts/torchvision_to_resnet_ddp.py")
    if head.startswith(b"version https://git-lfs"):
        return "it is a Git LFS pointer, not the file itself: run `git lfs pull`"
    if head.startswith(b"\x93NUMPY"):
        return "it is a NumPy .npy file"
    if head.startswith(b"\x89HDF"):
        return "it is an HDF5 file (Keras?)"
    if head.startswith(b"\x1f\x8b"):
        return "it is gzip-compressed: decompress it first"
    if len(head) >= 9 and head[8:9] == b"{":
        return ("it looks like a safetensors file: load it in Python, torch.save the state_dict, "
                "and convert that with scripts/torchvision_to_resnet_ddp.py")
    return "it does not start with the resnet_ddp magic 'RDDPTNSR'"


class _Cursor:
    """Walks the file's bytes, checking every length against what is left."""

    def __init__(self, data, path):
        self.data, self.path, self.position = data, path, 0
        self.place = "in the file header"

    def remaining(self):
        return len(self.data) - self.position

    def take(self, size):
        if size > self.remaining():
            self.truncated(size)
        chunk = self.data[self.position:self.position + size]
        self.position += size
        return chunk

    def unpack(self, fmt):
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))[0]

    def text(self, size):
        try:
            return bytes(self.take(size)).decode("utf-8")
        except UnicodeDecodeError:
            self.corrupt("text that is not UTF-8")

    def truncated(self, wanted):
        raise FormatError(
            f"'{self.path}' is truncated {self.place}: {wanted} more bytes are needed but only "
            f"{self.remaining()} remain ({wanted - self.remaining()} missing). The file was cut "
            "short, perhaps by an interrupted copy or download (or a length before this point "
            "is corrupt): copy it again")

    def corrupt(self, what):
        raise FormatError(f"'{self.path}' is corrupt {self.place}: {what}. "
                          "Copy the file again, or use an earlier copy")


def read(path):
    """Reads and checks a whole tensor file; raises FormatError naming the file and the problem."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as stream:
            data = memoryview(stream.read())
    except IsADirectoryError:
        raise FormatError(f"'{path}' is a directory, not a tensor file") from None
    except OSError as error:
        raise FormatError(f"cannot open '{path}': {error.strerror}") from None
    if len(data) == 0:
        raise FormatError(f"'{path}' is empty: it was never written completely")
    head = bytes(data[:32])
    if not MAGIC.startswith(head[:len(MAGIC)]):
        raise FormatError(f"'{path}' is not a resnet_ddp tensor file: {_foreign_file_advice(head)}")

    cursor = _Cursor(data, path)
    cursor.take(len(MAGIC))
    version = cursor.unpack("I")
    if version > VERSION:
        raise FormatError(f"'{path}' uses format version {version}, newer than this reader "
                          f"reads ({VERSION}): update resnet_ddp's scripts")
    if version == 0:
        cursor.corrupt("format version 0 does not exist")
    flags = cursor.unpack("I")
    metadata = {}
    metadata_count = cursor.unpack("Q")
    index = 0
    while index < metadata_count:  # a corrupt count runs out of file, it never sizes anything
        cursor.place = f"in metadata entry {index + 1} of {metadata_count}"
        key_size = cursor.unpack("I")
        if not 1 <= key_size <= MAX_NAME_BYTES:
            cursor.corrupt(f"a metadata key of {key_size} bytes (allowed: 1 to {MAX_NAME_BYTES})")
        key = cursor.text(key_size)
        value = cursor.text(cursor.unpack("I"))
        if key in metadata:
            cursor.corrupt(f"metadata key '{key}' appears twice")
        metadata[key] = value
        index += 1
    cursor.place = "in the file header"
    tensor_count = cursor.unpack("Q")
    computed = zlib.crc32(data[:cursor.position])
    stored = cursor.unpack("I")
    if computed != stored:
        cursor.corrupt(f"the header's CRC-32 is {computed:#010x} but the file records "
                       f"{stored:#010x}")
    if flags != 0:
        raise FormatError(f"'{path}' uses format features this reader does not know "
                          f"(flags {flags:#010x}): update resnet_ddp's scripts")

    tensors, dtypes, positions = {}, {}, {}
    index = 0
    while index < tensor_count:
        ordinal = f"{index + 1} of {tensor_count}"
        previous = next(reversed(tensors), None)
        cursor.place = f"in the header of tensor {ordinal}" + (
            f" (after '{previous}')" if previous is not None else "")
        record_start = cursor.position
        name_size = cursor.unpack("I")
        if not 1 <= name_size <= MAX_NAME_BYTES:
            cursor.corrupt(f"a tensor name of {name_size} bytes (allowed: 1 to {MAX_NAME_BYTES})")
        name = cursor.text(name_size)
        cursor.place = f"in the header of tensor '{name}' ({ordinal})"
        code = cursor.unpack("I")
        if code not in DTYPES:
            cursor.corrupt(f"unknown dtype code {code} (a file from a newer resnet_ddp?)")
        dtype_name, dtype = DTYPES[code]
        ndim = cursor.unpack("I")
        if ndim > MAX_DIMS:
            cursor.corrupt(f"{ndim} dimensions (at most {MAX_DIMS})")
        shape = tuple(cursor.unpack("q") for _ in range(ndim))
        if any(dim < 0 for dim in shape):
            cursor.corrupt(f"a negative dimension in {list(shape)}")
        expected = dtype.itemsize * int(np.prod(shape, dtype=object))
        byte_count = cursor.unpack("Q")
        if byte_count != expected:
            cursor.corrupt(f"the byte count {byte_count} disagrees with shape {list(shape)} of "
                           f"{dtype_name} ({expected} bytes)")
        header_end = cursor.position
        stored = cursor.unpack("I")
        cursor.place = f"in the data of tensor '{name}' ({ordinal})"
        values = cursor.take(byte_count)
        computed = zlib.crc32(values, zlib.crc32(data[record_start:header_end]))
        if computed != stored:
            cursor.corrupt(f"its CRC-32 is {computed:#010x} but the file records {stored:#010x}, "
                           "so its name, shape or values were damaged")
        cursor.place = "in its list of tensors"
        if name in positions:
            cursor.corrupt(f"tensors {positions[name] + 1} and {index + 1} are both named '{name}'")
        positions[name] = index
        tensors[name] = np.frombuffer(values, dtype=dtype).reshape(shape).copy()
        dtypes[name] = dtype_name
        index += 1

    last = next(reversed(tensors), None)
    cursor.place = "after its last tensor" + (f" '{last}'" if last else "") + \
        ", where the end marker belongs"
    if bytes(cursor.take(len(END_MARKER))) != END_MARKER:
        cursor.corrupt(f"the end marker is missing; the header announces {tensor_count} "
                       "tensors, perhaps more follow")
    cursor.place = "after the end marker"
    if cursor.remaining():
        cursor.corrupt(f"{cursor.remaining()} more bytes follow, where the file should end")
    return TensorFile(metadata, tensors, dtypes)


def _dtype_name(name, array, dtypes):
    natural = NAME_OF_NUMPY.get(array.dtype.newbyteorder("="))
    wanted = (dtypes or {}).get(name, natural)
    if wanted == "bf16" and array.dtype.kind == "u" and array.dtype.itemsize == 2:
        return wanted
    if wanted is None or wanted != natural:
        raise FormatError(f"tensor '{name}' has numpy dtype {array.dtype}, which the format "
                          f"cannot hold as {wanted or 'any dtype'}: use one of float32, float64, "
                          "int64, int32, uint8, float16, or uint16 bit patterns marked bf16")
    return wanted


def _utf8(text, what):
    if not isinstance(text, str):
        raise FormatError(f"{what} must be a str, got {type(text).__name__}")
    return text.encode("utf-8")


def encode(tensors, metadata=None, dtypes=None):
    """The bytes of a tensor file. Metadata keys go in ascending order, as the C++ writer's."""
    metadata = metadata or {}
    header = bytearray(MAGIC + struct.pack("<IIQ", VERSION, 0, len(metadata)))
    for key in sorted(metadata):
        key_bytes = _utf8(key, "a metadata key")
        if not 1 <= len(key_bytes) <= MAX_NAME_BYTES:
            raise FormatError(f"metadata key '{key}' must be 1 to {MAX_NAME_BYTES} bytes long")
        value_bytes = _utf8(metadata[key], f"metadata value of '{key}'")
        header += struct.pack("<I", len(key_bytes)) + key_bytes
        header += struct.pack("<I", len(value_bytes)) + value_bytes
    header += struct.pack("<Q", len(tensors))
    header += struct.pack("<I", zlib.crc32(header))
    parts = [bytes(header)]
    for name, array in tensors.items():
        array = np.asarray(array)
        dtype_name = _dtype_name(name, array, dtypes)
        name_bytes = _utf8(name, "a tensor name")
        if not 1 <= len(name_bytes) <= MAX_NAME_BYTES:
            raise FormatError(f"tensor name '{name}' must be 1 to {MAX_NAME_BYTES} bytes long")
        if array.ndim > MAX_DIMS:
            raise FormatError(f"tensor '{name}' has {array.ndim} dimensions, more than {MAX_DIMS}")
        code = CODE_OF_NAME[dtype_name]
        data = np.ascontiguousarray(array, dtype=DTYPES[code][1]).tobytes()
        record = struct.pack("<I", len(name_bytes)) + name_bytes
        record += struct.pack(f"<II{array.ndim}qQ", code, array.ndim, *array.shape, len(data))
        parts += [record, struct.pack("<I", zlib.crc32(data, zlib.crc32(record))), data]
    parts.append(END_MARKER)
    return b"".join(parts)


def write(path, tensors, metadata=None, dtypes=None):
    """Writes crash-safely: a temporary beside `path`, synced, then renamed over it.

    tensors: name -> array, written in that order. dtypes: optional name -> dtype name, needed
    only to mark uint16 arrays as bf16. On failure an existing file at `path` is left as it was.
    """
    path = os.fspath(path)
    data = encode(tensors, metadata, dtypes)
    temporary = f"{path}.tmp.{os.getpid()}"
    try:
        with open(temporary, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    # The rename lives in the directory: sync it so that it survives a power loss.
    directory = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(directory)
    except OSError:
        pass  # some file systems cannot sync a directory; the rename is as durable as they allow
    finally:
        os.close(directory)


# --- The model a weights file holds -------------------------------------------------------

@dataclasses.dataclass
class ModelSpec:
    stem: str = "imagenet"  # "imagenet": conv 7x7/2 + maxpool; "cifar": conv 3x3/1, no maxpool
    in_channels: int = 3
    num_classes: int = 1000
    widths: tuple = (64, 128, 256, 512)
    blocks: tuple = (2, 2, 2, 2)

    def summary(self):
        return (f"stem={self.stem} in_channels={self.in_channels} num_classes={self.num_classes} "
                f"widths={','.join(map(str, self.widths))} "
                f"blocks={','.join(map(str, self.blocks))}")

    def metadata(self):
        return {"model.stem": self.stem, "model.in_channels": str(self.in_channels),
                "model.num_classes": str(self.num_classes),
                "model.widths": ",".join(map(str, self.widths)),
                "model.blocks": ",".join(map(str, self.blocks))}


def spec_from_metadata(metadata, source):
    """The spec recorded in the metadata, or None when there is none."""
    keys = ["model.stem", "model.in_channels", "model.num_classes", "model.widths", "model.blocks"]
    present = [key for key in keys if key in metadata]
    if not present:
        return None
    if len(present) != len(keys):
        missing = sorted(set(keys) - set(present))
        raise FormatError(f"{source}: its metadata describes the model but lacks {missing[0]}")
    try:
        widths = tuple(int(v) for v in metadata["model.widths"].split(","))
        blocks = tuple(int(v) for v in metadata["model.blocks"].split(","))
        spec = ModelSpec(metadata["model.stem"], int(metadata["model.in_channels"]),
                         int(metadata["model.num_classes"]), widths, blocks)
    except ValueError as error:
        raise FormatError(f"{source}: malformed model metadata: {error}") from None
    counts = (spec.in_channels, spec.num_classes, *widths, *blocks)
    if spec.stem not in ("imagenet", "cifar") or len(widths) != 4 or len(blocks) != 4 or \
            min(counts) < 1:
        raise FormatError(f"{source}: its metadata describes an impossible model: {spec.summary()}")
    return spec


def infer_spec(shapes, source):
    """The spec implied by tensor shapes alone (name -> shape), as src/weights.cpp infers it."""
    def need(name, ndim):
        if name not in shapes:
            raise FormatError(f"cannot tell which model {source} holds: it has no tensor '{name}' "
                              "(is it a torchvision ResNet state_dict?)")
        shape = tuple(shapes[name])
        if len(shape) != ndim:
            raise FormatError(f"cannot tell which model {source} holds: '{name}' has shape "
                              f"{list(shape)}, expected {ndim} dimensions")
        return shape

    stem_shape = need("conv1.weight", 4)
    kernels = {(7, 7): "imagenet", (3, 3): "cifar"}
    if stem_shape[2:] not in kernels:
        raise FormatError(f"{source}: conv1.weight has shape {list(stem_shape)}; resnet_ddp "
                          "builds 7x7 (imagenet) and 3x3 (cifar) stem convolutions")
    if "layer1.0.conv3.weight" in shapes:
        raise FormatError(f"{source} holds a Bottleneck ResNet (ResNet-50/101/152); resnet_ddp "
                          "builds BasicBlock ResNets (ResNet-18/34)")
    widths, blocks = [], []
    for stage in range(1, 5):
        widths.append(need(f"layer{stage}.0.conv1.weight", 4)[0])
        count = 0
        while f"layer{stage}.{count}.conv1.weight" in shapes:
            count += 1
        blocks.append(count)
    return ModelSpec(kernels[stem_shape[2:]], stem_shape[1], need("fc.weight", 2)[0],
                     tuple(widths), tuple(blocks))


def expected_tensors(spec):
    """name -> (shape, kind) in torchvision's state_dict order; kind is "parameter",
    "running_stat" or "counter" (num_batches_tracked, an int64 scalar)."""
    out = {}

    def batchnorm(prefix, channels):
        out[prefix + ".weight"] = ((channels,), "parameter")
        out[prefix + ".bias"] = ((channels,), "parameter")
        out[prefix + ".running_mean"] = ((channels,), "running_stat")
        out[prefix + ".running_var"] = ((channels,), "running_stat")
        out[prefix + ".num_batches_tracked"] = ((), "counter")

    kernel = 7 if spec.stem == "imagenet" else 3
    out["conv1.weight"] = ((spec.widths[0], spec.in_channels, kernel, kernel), "parameter")
    batchnorm("bn1", spec.widths[0])
    channels = spec.widths[0]
    for stage, (width, count) in enumerate(zip(spec.widths, spec.blocks)):
        for index in range(count):
            # torchvision's BasicBlock: the first block of stages 2-4 strides, and the identity
            # path gets a 1x1 conv + BN whenever the shape changes.
            stride = 2 if stage > 0 and index == 0 else 1
            prefix = f"layer{stage + 1}.{index}"
            out[prefix + ".conv1.weight"] = ((width, channels, 3, 3), "parameter")
            batchnorm(prefix + ".bn1", width)
            out[prefix + ".conv2.weight"] = ((width, width, 3, 3), "parameter")
            batchnorm(prefix + ".bn2", width)
            if stride != 1 or channels != width:
                out[prefix + ".downsample.0.weight"] = ((width, channels, 1, 1), "parameter")
                batchnorm(prefix + ".downsample.1", width)
            channels = width
    out["fc.weight"] = ((spec.num_classes, channels), "parameter")
    out["fc.bias"] = ((spec.num_classes,), "parameter")
    return out


def check_against_spec(shapes, spec, ignore_extra=False):
    """Problems (one line each) between name -> shape and the tensors the spec needs."""
    expected = expected_tensors(spec)
    problems = [f"missing tensor '{name}' {list(shape)}"
                for name, (shape, _) in expected.items() if name not in shapes]
    problems += [f"tensor '{name}' has shape {list(shapes[name])}, but the model expects "
                 f"{list(shape)}" for name, (shape, _) in expected.items()
                 if name in shapes and tuple(shapes[name]) != shape]
    if not ignore_extra:
        problems += [f"unexpected tensor '{name}' {list(shapes[name])}: a ResNet with "
                     f"{spec.summary()} has no tensor of that name"
                     for name in shapes if name not in expected]
    return problems
