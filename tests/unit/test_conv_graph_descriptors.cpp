// The graph API's convolution operations (--conv-api graph) against the cuDNN this program is
// linked with, not the emulator's stand-in. Finalizing an operation needs no device, and there
// cuDNN checks that the operands' dimensions, strides and types fit the convolution: so every
// operation the network would build is held to the real library here, on any machine. What
// needs a device (the operation graph, heuristics, plans, their execution) is left to the GPU
// tests.
#include <doctest/doctest.h>

#include <cudnn.h>

#include <string>
#include <vector>

#include "resnet_ddp/cuda/conv_graph.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/model_spec.h"

using namespace rddp;

namespace {

struct NetworkConv {
  std::string name;
  ConvShape shape;
  bool input_grad;  // the executor runs backward data (not for the stem: the input needs none)
};

// Every convolution of the network at `size` x `size`, with the shape the executor gives it.
std::vector<NetworkConv> network_convs(Stem stem, int size, int batch) {
  ModelSpec spec;
  spec.stem = stem;
  const NetDesc net = describe(spec);
  std::vector<NetworkConv> convs;
  for_each_conv(net, size, [&](const ConvDesc& c, int in_size) {
    const bool is_stem = &c == &net.stem_conv;
    convs.push_back({c.name,
                     {batch, c.in_channels, in_size, in_size,
                      c.out_channels, c.kernel, c.stride, c.pad},
                     !is_stem});
  });
  return convs;
}

cuda::MathPolicy policy_of(cudnnDataType_t type, cudnnTensorFormat_t format) {
  cuda::MathPolicy policy;
  policy.data_type = type;
  policy.format = format;
  policy.api = cuda::ConvApi::graph;
  return policy;
}

// Every operation the executor builds for `convs`: forward, backward filter, and backward data
// overwriting and adding (beta 0 and 1). Returns how many cuDNN finalized.
int finalize_all(const std::vector<NetworkConv>& convs, const cuda::MathPolicy& policy) {
  int finalized = 0;
  const auto finalize = [&](const NetworkConv& conv, cuda::ConvDirection direction, float beta,
                            const char* what) {
    INFO(conv.name, " ", what, ", beta ", beta);
    CHECK_NOTHROW(cuda::finalize_conv_operation(conv.shape, direction, beta, policy));
    ++finalized;
  };
  for (const NetworkConv& conv : convs) {
    finalize(conv, cuda::ConvDirection::forward, 0.0f, "forward");
    finalize(conv, cuda::ConvDirection::backward_filter, 0.0f, "backward filter");
    if (!conv.input_grad) continue;
    finalize(conv, cuda::ConvDirection::backward_data, 0.0f, "backward data");
    finalize(conv, cuda::ConvDirection::backward_data, 1.0f, "backward data, adding");
  }
  return finalized;
}

struct Case {
  Stem stem;
  int size, batch;
};

}  // namespace

TEST_CASE("cuDNN finalizes every convolution operation of the network, in every type and layout") {
  INFO("cuDNN ", cudnnGetVersion());
  // The benchmark's two configurations, the emulated tests' small one, and an odd size whose
  // outputs round down at every stride-2 window.
  const Case cases[] = {{Stem::imagenet, 224, 256}, {Stem::cifar, 32, 128},
                        {Stem::imagenet, 64, 2}, {Stem::imagenet, 97, 3}};
  for (const Case& c : cases) {
    for (cudnnDataType_t type : {CUDNN_DATA_FLOAT, CUDNN_DATA_BFLOAT16, CUDNN_DATA_HALF}) {
      for (cudnnTensorFormat_t format : {CUDNN_TENSOR_NCHW, CUDNN_TENSOR_NHWC}) {
        INFO(to_string(c.stem), " stem, ", c.size, "x", c.size, ", batch ", c.batch,
             ", cuDNN data type ", static_cast<int>(type),
             format == CUDNN_TENSOR_NHWC ? ", NHWC" : ", NCHW");
        const std::vector<NetworkConv> convs = network_convs(c.stem, c.size, c.batch);
        REQUIRE(convs.size() == 20);  // the stem, 16 in the blocks, 3 downsampling
        // 2 directions of the stem, 4 operations of each of the other 19.
        CHECK(finalize_all(convs, policy_of(type, format)) == 2 + 19 * 4);
      }
    }
  }
}

TEST_CASE("cuDNN's refusal of an operation is an error naming its status") {
  // A 3x3 convolution whose padded input is too small for the kernel has no output: cuDNN
  // refuses it, which shows that finalizing checks something. conv_graph_candidates turns such
  // a refusal into a fallback to the legacy API (tests/emu/engine/test_conv_graph_selection.cpp).
  const ConvShape no_output{2, 16, 1, 1, 16, 3, 1, 0};
  const cuda::MathPolicy policy = policy_of(CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_NHWC);
  std::string message;
  try {
    cuda::finalize_conv_operation(no_output, cuda::ConvDirection::forward, 0.0f, policy);
  } catch (const Error& refusal) {
    message = refusal.what();
  }
  CHECK(message.find("CUDNN_STATUS_BAD_PARAM") != std::string::npos);
  CHECK(message.find("conv_graph.cpp") != std::string::npos);
}
