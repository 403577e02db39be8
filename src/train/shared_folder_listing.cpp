#include "resnet_ddp/train/shared_folder_listing.h"

#include <string>

#include "resnet_ddp/ddp/fatal.h"
#include "resnet_ddp/error.h"

namespace rddp {

namespace {

// The first byte says what follows: a listing, or rank 0's error message.
constexpr char kListing = 'L';
constexpr char kError = 'E';

}  // namespace

data::FolderLister rank0_folder_lister(ProcessGroup& group) {
  return [&group](const std::string& root, bool may_be_absent) {
    std::string message;
    if (group.rank() == 0) {
      try {
        message = kListing + data::encode_listing(data::list_image_folder(root, may_be_absent));
      } catch (const Error& error) {
        message = kError + std::string(error.what());
      }
    }
    message = group.broadcast_from_rank0(std::move(message), "the listing of " + root);
    if (message.empty() || message[0] != kListing)
      throw ddp::AllRanksError(message.empty() ? "rank 0 sent no listing of " + root
                                                : message.substr(1));
    return data::decode_listing(message.substr(1));
  };
}

}  // namespace rddp
