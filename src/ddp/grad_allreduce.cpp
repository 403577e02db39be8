// Names of the gradient allreduce types, for the command line and the settings table.
#include "resnet_ddp/ddp/grad_allreduce.h"

#include "resnet_ddp/error.h"

namespace rddp::ddp {

const char* to_string(GradAllreduce kind) { return kind == GradAllreduce::bf16 ? "bf16" : "fp32"; }

GradAllreduce parse_grad_allreduce(const std::string& flag, const std::string& text) {
  if (text == "fp32") return GradAllreduce::fp32;
  if (text == "bf16") return GradAllreduce::bf16;
  fail(flag, ": '", text, "' is not one of: fp32, bf16");
}

}  // namespace rddp::ddp
