#pragma once
// Image folders listed once per job: rank 0 walks the folder and every rank takes its list.
// On a parallel file system each rank's walk of ImageNet's 1.28 million files is that many
// requests to the metadata servers, from every rank at once at start-up; and ranks whose views
// of a shared file system differ for a moment (a file being copied in, an NFS attribute cache)
// would otherwise train on different lists, so that index i names different images.
#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/train/process_group.h"

namespace rddp {

// A lister for DataConfig::list_folder. Every rank must call it for the same folders in the
// same order (the readers do). When rank 0 cannot list a folder, every rank throws
// ddp::AllRanksError with rank 0's message. The group must outlive the lister.
data::FolderLister rank0_folder_lister(ProcessGroup& group);

}  // namespace rddp
