#pragma once
// Checkpoints: a weights file (weights.h) plus the optimizer state, the position in training
// and what the position depends on, in one crash-safe tensor file per save:
//   DIR/checkpoint-<global step, 10 digits>.rddp
// The sampler and augmentation draw from (seed, epoch, sample index), so the position
// (epoch, step) and the seed restore them exactly; no RNG state needs saving.
#include <cstdint>
#include <string>
#include <vector>

#include "resnet_ddp/engine.h"
#include "resnet_ddp/model_state.h"

namespace rddp {

struct TrainPosition {
  int64_t epoch = 0;          // the epoch in progress (0-based)
  int64_t step_in_epoch = 0;  // steps of it already taken
  int64_t global_step = 0;    // steps taken in all
  int64_t world_size = 1;     // the job that wrote it: its sample order depends on these
  int64_t batch_size = 0;
  uint64_t seed = 0;
  // The steps of an epoch in the job that wrote it (0 where the file does not say): a position
  // at its end is an epoch trained but not yet evaluated (a run preempted before or during the
  // evaluation), which carries over whole to a job of another shape.
  int64_t steps_per_epoch = 0;
  // The settings of the run that wrote it (rank_settings.h's encode_settings), so that a run
  // resumed with others (a job script edited between requeues) can say which; "" in older files.
  std::string run_settings;
};

// Writes a checkpoint into `dir` (created if missing) and removes all but the newest `keep`.
// Returns the new file's path. Throws Error, leaving earlier checkpoints intact, if it fails.
std::string save_checkpoint(const std::string& dir, const ModelState<float>& model,
                            const OptimizerConfig& optimizer_config, const OptimizerState& optimizer,
                            const TrainPosition& position, int keep);

struct ResumedCheckpoint {
  std::string path;
  TrainPosition position;
  std::vector<std::string> notes;  // checkpoints passed over and why
};

// Loads the newest checkpoint of `dir` that reads back whole and fits `model` and the
// optimizer kind; a damaged newer one is passed over with a note. Throws Error when the
// directory holds no usable checkpoint, naming each one tried and why it failed, and when a
// newer one may well be whole but cannot be read here (no read permission, a format version
// newer than this build's): resuming from an older one would lose its progress, and this
// run's checkpoints would replace it.
ResumedCheckpoint load_latest_checkpoint(const std::string& dir, ModelState<float>& model,
                                         const OptimizerConfig& optimizer_config, OptimizerState& optimizer);

// Checkpoint files of `dir`, newest first (by the step in their names).
std::vector<std::string> list_checkpoints(const std::string& dir);

// Removes the temporary files of checkpoint writes that a killed run left in `dir` (only on
// file systems without unnamed temporaries: atomic_file_writer.h) and returns their names.
// Only while holding the directory's lock (checkpoint_lock.h): another run's write in progress
// would look the same.
std::vector<std::string> remove_stale_temporaries(const std::string& dir);

}  // namespace rddp
