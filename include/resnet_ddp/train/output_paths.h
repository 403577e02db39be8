#pragma once
// The run's outputs, checked before any work on the ranks that write them, the way their writes
// will go: the checkpoint directory is created and a file made and removed in it, and the final
// weights' temporary is made and removed beside them (AtomicFileWriter::check_target). A missing
// or unwritable directory, a file in the way or a target that is not a regular file is refused
// in seconds, naming the path and the fix, instead of after hours of training.
#include <string>

#include "resnet_ddp/train/options.h"

namespace rddp {

// The file --save-weights names for `rank` ("{rank}" replaced: every rank writes its own), or ""
// where this rank writes none (ranks other than 0 without "{rank}").
std::string weights_path_for(const std::string& save_weights, int rank);

// What is wrong with this rank's outputs, or "" when they can be written. The caller makes
// every rank refuse a problem any rank found (rank_agreement.h's refuse_together).
std::string output_path_problem(const TrainOptions& options, int rank);

}  // namespace rddp
