#include "resnet_ddp/batchnorm_impl.h"

#include "resnet_ddp/error.h"

namespace rddp {

BatchNormImpl parse_batchnorm_impl(const std::string& flag, const std::string& text) {
  for (BatchNormImpl impl : {BatchNormImpl::cudnn, BatchNormImpl::fused})
    if (text == to_string(impl)) return impl;
  fail(flag, ": '", text, "' is not one of: cudnn, fused");
}

}  // namespace rddp
