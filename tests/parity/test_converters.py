"""The tensor file format between PyTorch, Python and C++.

torchvision models with random weights and BatchNorm buffers go through
torchvision_to_resnet_ddp.py and resnet_ddp_to_torchvision.py and must come back bit for bit
and load into torchvision. The Python reader is checked on files the C++ writer made (the
unit test cases "... writes a sample file for other readers", run with RDDP_SAMPLE_OUT), and
the Python writer must produce the same bytes for the same contents.
"""

import contextlib
import io
import os
import re
import runpy
import subprocess
import sys
import tempfile
import traceback
import unittest

import numpy as np
import torch
import torchvision

import rddp_tensors

SOURCE_DIR = os.environ.get("RDDP_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD_DIR = os.environ.get("RDDP_BUILD_DIR", os.path.join(SOURCE_DIR, "build"))
SCRIPTS = os.path.join(SOURCE_DIR, "scripts")
TO_RDDP = os.path.join(SCRIPTS, "torchvision_to_resnet_ddp.py")
TO_TORCHVISION = os.path.join(SCRIPTS, "resnet_ddp_to_torchvision.py")


def run(script, *args, ok=True):
    """Runs a converter script as `python script args...` would, but in this process: each
    new Python would spend seconds importing torch, and this test runs the scripts two dozen
    times. An exit or uncaught exception becomes the return code and stderr the interpreter
    gives (test_help runs both scripts as programs)."""
    stdout, stderr = io.StringIO(), io.StringIO()
    saved_argv = sys.argv
    sys.argv = [script, *args]
    returncode = 0
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                runpy.run_path(script, run_name="__main__")
            except SystemExit as done:
                if isinstance(done.code, int) or done.code is None:
                    returncode = done.code or 0
                else:
                    print(done.code, file=sys.stderr)
                    returncode = 1
            except Exception:  # what the interpreter prints for an uncaught exception
                traceback.print_exc()
                returncode = 1
    finally:
        sys.argv = saved_argv
    result = subprocess.CompletedProcess([script, *args], returncode, stdout.getvalue(),
                                         stderr.getvalue())
    if ok and result.returncode != 0:
        raise AssertionError(
            f"{args} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
    return result


def randomised(model, seed):
    """Every parameter and BatchNorm buffer random, so that nothing passes by being a default;
    scaled so that activations stay finite through the network and outputs can be compared."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if name.endswith("num_batches_tracked"):
                tensor.copy_(torch.randint(0, 10**6, (), generator=generator))
            elif name.endswith("running_var") or (tensor.dim() == 1 and name.endswith(".weight")):
                tensor.copy_(torch.rand(tensor.shape, generator=generator) + 0.5)
            elif tensor.dim() > 1:  # convolution and fc weights
                fan_in = tensor[0].numel()
                tensor.copy_(torch.randn(tensor.shape, generator=generator) / fan_in ** 0.5)
            else:  # biases and running means
                tensor.copy_(torch.randn(tensor.shape, generator=generator) * 0.1)
    return model


def assert_same_outputs(test, expected_model, loaded_model, images):
    expected_model.eval(), loaded_model.eval()
    with torch.no_grad():
        expected, loaded = expected_model(images), loaded_model(images)
    test.assertTrue(torch.isfinite(expected).all())
    test.assertGreater(expected.abs().max().item(), 1e-3)
    test.assertTrue(torch.equal(expected, loaded))


def cifar_resnet18(in_channels, num_classes):
    model = torchvision.models.resnet18(num_classes=num_classes)
    model.conv1 = torch.nn.Conv2d(in_channels, 64, 3, 1, 1, bias=False)
    model.maxpool = torch.nn.Identity()
    return model


def assert_same_state_dict(test, expected, actual):
    test.assertEqual(list(expected), list(actual))
    for name, tensor in expected.items():
        test.assertEqual(tensor.dtype, actual[name].dtype, name)
        test.assertEqual(tensor.shape, actual[name].shape, name)
        test.assertTrue(torch.equal(tensor, actual[name]), f"{name} changed")


class ConverterRoundTrip(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def round_trip(self, model, expected_spec):
        state_dict = model.state_dict()
        torch.save(state_dict, self.path("in.pth"))
        forward = run(TO_RDDP, self.path("in.pth"), self.path("w.rddp"))
        self.assertIn(f"for {expected_spec}", forward.stdout)

        converted = rddp_tensors.read(self.path("w.rddp"))
        self.assertEqual(list(converted.tensors), list(state_dict))  # torchvision's order
        self.assertEqual(converted.metadata["kind"], "weights")
        self.assertEqual(converted.metadata["converted_from"], "in.pth")
        self.assertEqual(rddp_tensors.spec_from_metadata(converted.metadata, "w").summary(),
                         expected_spec)
        for name, tensor in state_dict.items():
            self.assertEqual(converted.tensors[name].tobytes(), tensor.numpy().tobytes(), name)
            self.assertEqual(converted.tensors[name].shape, tuple(tensor.shape), name)
        self.assertEqual(converted.dtypes["bn1.num_batches_tracked"], "i64")
        self.assertEqual(converted.tensors["bn1.num_batches_tracked"].shape, ())

        backward = run(TO_TORCHVISION, self.path("w.rddp"), self.path("out.pth"))
        assert_same_state_dict(self, state_dict, torch.load(self.path("out.pth")))
        return backward.stdout

    def test_imagenet_stem_1000_classes(self):
        model = randomised(torchvision.models.resnet18(), 1)
        printed = self.round_trip(
            model, "stem=imagenet in_channels=3 num_classes=1000 widths=64,128,256,512 "
                   "blocks=2,2,2,2")
        fresh = torchvision.models.resnet18()
        fresh.load_state_dict(torch.load(self.path("out.pth")))  # strict
        images = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(2))
        assert_same_outputs(self, model, fresh, images)
        self.assertNotIn("model.conv1", printed)  # torchvision's own stem needs no change

    def test_cifar_stem_10_classes_1_channel_and_the_printed_recipe(self):
        model = randomised(cifar_resnet18(1, 10), 3)
        printed = self.round_trip(
            model, "stem=cifar in_channels=1 num_classes=10 widths=64,128,256,512 blocks=2,2,2,2")
        # The converter prints the lines that build the model; they must work as printed.
        recipe = [line[4:] for line in printed.splitlines() if line.startswith("    ")]
        self.assertIn("model.maxpool = nn.Identity()", recipe)
        scope = {}
        exec("\n".join(recipe), scope)
        images = torch.randn(2, 1, 32, 32, generator=torch.Generator().manual_seed(4))
        assert_same_outputs(self, model, scope["model"], images)

    def test_resnet34_with_a_one_channel_imagenet_stem_and_its_recipe(self):
        model = torchvision.models.resnet34(num_classes=5)
        model.conv1 = torch.nn.Conv2d(1, 64, 7, 2, 3, bias=False)
        randomised(model, 9)
        printed = self.round_trip(
            model, "stem=imagenet in_channels=1 num_classes=5 widths=64,128,256,512 "
                   "blocks=3,4,6,3")
        recipe = [line[4:] for line in printed.splitlines() if line.startswith("    ")]
        self.assertIn("model = torchvision.models.resnet34(num_classes=5)", recipe)
        scope = {}
        exec("\n".join(recipe), scope)
        images = torch.randn(2, 1, 40, 40, generator=torch.Generator().manual_seed(10))
        assert_same_outputs(self, model, scope["model"], images)

    def test_float64_weights_stay_float64(self):
        model = randomised(cifar_resnet18(3, 4), 5).double()
        self.round_trip(
            model, "stem=cifar in_channels=3 num_classes=4 widths=64,128,256,512 blocks=2,2,2,2")
        self.assertEqual(rddp_tensors.read(self.path("w.rddp")).dtypes["fc.weight"], "f64")

    def test_pickled_models_checkpoints_and_ddp_prefixes_give_the_same_weights(self):
        model = randomised(torchvision.models.resnet18(num_classes=3), 6)
        torch.save(model.state_dict(), self.path("state_dict.pth"))
        run(TO_RDDP, self.path("state_dict.pth"), self.path("reference.rddp"))
        reference = rddp_tensors.read(self.path("reference.rddp"))
        wrapped = {"epoch": 7,
                   "state_dict": {"module." + k: v for k, v in model.state_dict().items()}}
        for name, saved in (("model.pth", model), ("checkpoint.pth", wrapped)):
            torch.save(saved, self.path(name))
            printed = run(TO_RDDP, self.path(name), self.path("other.rddp")).stdout
            self.assertIn("note:", printed)
            other = rddp_tensors.read(self.path("other.rddp"))
            self.assertEqual(list(other.tensors), list(reference.tensors))
            for tensor_name, array in reference.tensors.items():
                self.assertEqual(array.tobytes(), other.tensors[tensor_name].tobytes())
        self.assertIn("'module.' prefix", printed)

    def test_half_precision_is_widened_exactly(self):
        model = randomised(torchvision.models.resnet18(num_classes=2), 8).half()
        torch.save(model.state_dict(), self.path("half.pth"))
        printed = run(TO_RDDP, self.path("half.pth"), self.path("w.rddp")).stdout
        self.assertIn("widened 102 half-precision tensors to float32", printed)
        converted = rddp_tensors.read(self.path("w.rddp"))
        self.assertEqual(converted.dtypes["conv1.weight"], "f32")
        original = model.state_dict()["layer2.0.conv1.weight"].float().numpy()
        self.assertTrue(np.array_equal(converted.tensors["layer2.0.conv1.weight"], original))


class ConverterErrors(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def refused(self, args, expected):
        result = run(*args, ok=False)
        self.assertNotEqual(result.returncode, 0, result.stdout)
        self.assertIn(expected, result.stderr)
        self.assertNotIn("Traceback", result.stderr)

    def test_help(self):
        # As programs, in their own Python: the other tests run them in this process.
        for script in (TO_RDDP, TO_TORCHVISION):
            result = subprocess.run([sys.executable, script, "--help"], capture_output=True,
                                    text=True)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("usage:", result.stdout)
        refused = subprocess.run([sys.executable, TO_RDDP, os.devnull + ".missing", os.devnull],
                                 capture_output=True, text=True)
        self.assertEqual(refused.returncode, 1)
        self.assertIn("No such file or directory", refused.stderr)
        self.assertNotIn("Traceback", refused.stderr)

    def test_bad_inputs_are_explained(self):
        self.refused([TO_RDDP, self.path("missing.pth"), self.path("w.rddp")],
                     "No such file or directory")
        with open(self.path("garbage.pth"), "wb") as stream:
            stream.write(b"this is not a checkpoint")
        self.refused([TO_RDDP, self.path("garbage.pth"), self.path("w.rddp")], "torch.load")
        torch.save(torchvision.models.resnet50().state_dict(), self.path("resnet50.pth"))
        self.refused([TO_RDDP, self.path("resnet50.pth"), self.path("w.rddp")], "Bottleneck")
        torch.save({"weights": [1, 2]}, self.path("dict.pth"))
        self.refused([TO_RDDP, self.path("dict.pth"), self.path("w.rddp")], "not a state_dict")

        state_dict = torchvision.models.resnet18().state_dict()
        torch.save(state_dict, self.path("resnet18.pth"))
        self.refused([TO_RDDP, self.path("resnet18.pth"), self.path("w.rddp"), "--stem", "cifar"],
                     "is the imagenet stem")
        del state_dict["layer3.1.bn1.running_var"]
        torch.save(state_dict, self.path("incomplete.pth"))
        self.refused([TO_RDDP, self.path("incomplete.pth"), self.path("w.rddp")],
                     "missing tensor 'layer3.1.bn1.running_var' [256]")
        self.assertFalse(os.path.exists(self.path("w.rddp")))

        self.refused([TO_TORCHVISION, self.path("resnet18.pth"), self.path("out.pth")],
                     "scripts/torchvision_to_resnet_ddp.py")
        run(TO_RDDP, self.path("resnet18.pth"), self.path("w.rddp"))
        with open(self.path("w.rddp"), "rb") as stream:
            whole = stream.read()
        with open(self.path("cut.rddp"), "wb") as stream:
            stream.write(whole[:len(whole) // 2])
        self.refused([TO_TORCHVISION, self.path("cut.rddp"), self.path("out.pth")], "truncated")
        self.assertFalse(os.path.exists(self.path("out.pth")))

        nowhere = os.path.join(self.dir.name, "missing_dir")
        self.refused([TO_RDDP, self.path("resnet18.pth"), os.path.join(nowhere, "w.rddp")],
                     "No such file or directory")
        self.refused([TO_TORCHVISION, self.path("w.rddp"), os.path.join(nowhere, "out.pth")],
                     "No such file or directory")


def sample_tensors():
    """The contents documented beside the C++ test case that writes sample_tensors.rddp."""
    return {
        "f32.arange": (np.arange(24, dtype=np.float32) * np.float32(0.5) - 3).reshape(2, 3, 4),
        "f64.arange": np.arange(5, dtype=np.float64) * 0.125 - 0.25,
        "i64.scalar": np.array(-(2**40) - 7, dtype=np.int64),
        "i32.arange": (np.arange(3, dtype=np.int32) * 100000 - 100000).reshape(3, 1),
        "u8.arange": np.arange(256, dtype=np.uint8),
        "f32.empty": np.zeros((0, 3), dtype=np.float32),
        "f16.values": np.array([1.0, -2.0, 0.5], dtype=np.float16),
        "bf16.values": np.array([0x3F80, 0xC040, 0x3E80], dtype=np.uint16),  # 1.0, -3.0, 0.25
    }


def sample_weights_state_dict():
    """The contents documented beside the C++ test case that writes sample_weights.rddp, with
    names, order and shapes taken from torchvision: a cifar-stem resnet18 for 1 channel and 3
    classes whose widths 64,128,256,512 become 4,8,8,8."""
    narrow = {64: 4, 128: 8, 256: 8, 512: 8}
    state_dict = {}
    for t, (name, tensor) in enumerate(cifar_resnet18(1, 3).state_dict().items()):
        if name.endswith("num_batches_tracked"):
            state_dict[name] = torch.tensor(1000 + t, dtype=torch.int64)
            continue
        shape = [narrow.get(dim, dim) for dim in tensor.shape]
        count = int(np.prod(shape))
        values = t + (np.arange(count) % 256) / 256.0
        state_dict[name] = torch.from_numpy(values.astype(np.float32).reshape(shape))
    return state_dict


class FilesFromCpp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        unit_tests = os.path.join(BUILD_DIR, "tests", "unit_tests")
        if not os.path.exists(unit_tests):
            raise AssertionError(f"{unit_tests} is missing: build the project first")
        # The two test cases write their sample files where RDDP_SAMPLE_OUT points.
        result = subprocess.run(
            [unit_tests, "--test-case=*writes a sample file for other readers*"],
            env=dict(os.environ, RDDP_SAMPLE_OUT=cls.dir.name), capture_output=True, text=True)
        if result.returncode != 0:
            raise AssertionError(f"unit_tests failed:\n{result.stdout}{result.stderr}")

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def test_python_reads_every_dtype_the_cpp_writer_wrote(self):
        sample = rddp_tensors.read(self.path("sample_tensors.rddp"))
        self.assertEqual(sample.metadata, {"empty": "", "kind": "sample",
                                           "text": "UTF-8 \u2713 \u00fcn\u00efc\u00f6d\u00e9"})
        expected = sample_tensors()
        self.assertEqual(list(sample.tensors), list(expected))
        for name, array in expected.items():
            self.assertEqual(sample.tensors[name].dtype, array.dtype, name)
            self.assertEqual(sample.tensors[name].shape, array.shape, name)
            self.assertTrue(np.array_equal(sample.tensors[name], array), name)
        self.assertEqual(sample.dtypes["bf16.values"], "bf16")
        widened = (sample.tensors["bf16.values"].astype(np.uint32) << 16).view(np.float32)
        self.assertEqual(widened.tolist(), [1.0, -3.0, 0.25])

    def test_python_writer_makes_the_same_bytes(self):
        with open(self.path("sample_tensors.rddp"), "rb") as stream:
            cpp_bytes = stream.read()
        metadata = {"kind": "sample", "text": "UTF-8 \u2713 \u00fcn\u00efc\u00f6d\u00e9",
                    "empty": ""}
        python_bytes = rddp_tensors.encode(sample_tensors(), metadata, {"bf16.values": "bf16"})
        self.assertEqual(python_bytes, cpp_bytes)

    def test_python_reader_refuses_every_cut_and_every_flipped_bit(self):
        with open(self.path("sample_tensors.rddp"), "rb") as stream:
            whole = stream.read()
        damaged = self.path("damaged.rddp")
        for size in range(len(whole)):
            with open(damaged, "wb") as stream:
                stream.write(whole[:size])
            with self.assertRaises(rddp_tensors.FormatError, msg=f"cut at {size}"):
                rddp_tensors.read(damaged)
        for offset in range(len(whole)):
            flipped = bytearray(whole)
            flipped[offset] ^= 1 << (offset % 8)
            with open(damaged, "wb") as stream:
                stream.write(flipped)
            with self.assertRaises(rddp_tensors.FormatError, msg=f"bit flipped at {offset}"):
                rddp_tensors.read(damaged)
        newer = bytearray(whole)
        newer[8] = 2
        with open(damaged, "wb") as stream:
            stream.write(newer)
        with self.assertRaisesRegex(rddp_tensors.FormatError, "version 2, newer"):
            rddp_tensors.read(damaged)

    def test_cpp_weights_match_torchvision_names_and_the_converter(self):
        cpp = rddp_tensors.read(self.path("sample_weights.rddp"))
        state_dict = sample_weights_state_dict()
        self.assertEqual(list(cpp.tensors), list(state_dict))
        for name, tensor in state_dict.items():
            self.assertEqual(cpp.tensors[name].shape, tuple(tensor.shape), name)
            self.assertEqual(cpp.tensors[name].tobytes(), tensor.numpy().tobytes(), name)
        self.assertEqual(cpp.metadata, {
            "kind": "weights", "model.stem": "cifar", "model.in_channels": "1",
            "model.num_classes": "3", "model.widths": "4,8,8,8", "model.blocks": "2,2,2,2"})

        # The converter, given the same values as a torchvision state_dict, writes the same
        # file apart from recording where it came from.
        torch.save(state_dict, self.path("sample.pth"))
        run(TO_RDDP, self.path("sample.pth"), self.path("converted.rddp"))
        converted = rddp_tensors.read(self.path("converted.rddp"))
        self.assertEqual(converted.metadata.pop("converted_from"), "sample.pth")
        with open(self.path("sample_weights.rddp"), "rb") as stream:
            cpp_bytes = stream.read()
        self.assertEqual(rddp_tensors.encode(converted.tensors, converted.metadata), cpp_bytes)


class DocumentedExample(unittest.TestCase):
    def test_the_example_in_docs_is_what_the_writer_writes(self):
        with open(os.path.join(SOURCE_DIR, "docs", "file_format.md"), encoding="utf-8") as stream:
            doc = stream.read()
        block = doc.split("## A complete example", 1)[1].split("```")[1]
        documented = bytearray()
        for line in block.splitlines()[2:]:  # after the language tag line and the column titles
            for token in line.split()[1:]:
                if not re.fullmatch("[0-9a-f]{2}", token):
                    break
                documented.append(int(token, 16))
        written = rddp_tensors.encode({"fc.bias": np.array([1.0, -0.5], np.float32)},
                                      {"kind": "weights"})
        self.assertEqual(bytes(documented), written)


if __name__ == "__main__":
    unittest.main(verbosity=2)
