#pragma once
// How the CUDA engine lays activations out in device memory (the CPU engine, the loader, the
// flat parameter buffers and checkpoints are NCHW / OIHW whatever this says).
namespace rddp {

enum class MemoryFormat {
  nchw,  // PyTorch's default (torch.contiguous_format)
  nhwc,  // torch.channels_last: what tensor-core convolutions read without transposing
};

inline const char* to_string(MemoryFormat format) {
  return format == MemoryFormat::nhwc ? "nhwc" : "nchw";
}

}  // namespace rddp
