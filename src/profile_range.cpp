#include "resnet_ddp/profile_range.h"

#include <nvtx3/nvToolsExt.h>

namespace rddp {
namespace {

// One domain for all of resnet_ddp's ranges, so that a profile of a program that also uses
// NVTX elsewhere (NCCL, cuDNN) can filter them: `nsys stats --filter-nvtx`, `--nvtx-domain-include`.
nvtxDomainHandle_t domain() {
  static const nvtxDomainHandle_t handle = nvtxDomainCreateA("resnet_ddp");
  return handle;
}

nvtxEventAttributes_t named(const char* name) {
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = name;
  return attributes;
}

}  // namespace

ProfileRange::ProfileRange(const char* name) {
  const nvtxEventAttributes_t attributes = named(name);
  nvtxDomainRangePushEx(domain(), &attributes);
}

ProfileRange::~ProfileRange() { nvtxDomainRangePop(domain()); }

uint64_t start_profile_span(const std::string& name) {
  const nvtxEventAttributes_t attributes = named(name.c_str());
  return nvtxDomainRangeStartEx(domain(), &attributes);
}

void end_profile_span(uint64_t id) { nvtxDomainRangeEnd(domain(), id); }

}  // namespace rddp
