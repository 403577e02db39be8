#include "resnet_ddp/train/output_paths.h"

#include <filesystem>
#include <system_error>

#include "resnet_ddp/atomic_file_writer.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/printable.h"

namespace rddp {

namespace fs = std::filesystem;

namespace {

constexpr const char* kRankPlaceholder = "{rank}";

void check_checkpoint_dir(const std::string& dir) {
  std::error_code error;
  if (fs::exists(dir, error) && !fs::is_directory(dir, error))
    fail("--checkpoint-dir '", printable(dir),
         "' is a file, not a directory: give a directory (it is "
         "created if missing), or move the file away");
  fs::create_directories(dir, error);
  if (error)
    fail("--checkpoint-dir '", printable(dir), "': cannot create it: ", error.message(),
         "; give a directory you can create, or create it first");
  try {
    AtomicFileWriter::check_target((fs::path(dir) / "checkpoint-write-test.rddp").string());
  } catch (const Error& failed) {
    fail("--checkpoint-dir '", printable(dir),
         "': checkpoints cannot be written there: ", failed.what());
  }
}

// Two outputs that name one file: the weights written at the end would replace the metrics log
// (or a later record would be appended to nothing anyone can open).
void check_distinct(const std::string& weights, const std::string& log) {
  std::error_code error;
  const fs::path a = fs::weakly_canonical(weights, error);
  const fs::path b = error ? fs::path() : fs::weakly_canonical(log, error);
  if (error || a != b) return;
  fail("--save-weights and --log-json name the same file '", printable(weights),
       "': the weights written at the end would replace the metrics log; give each a path of its own");
}

}  // namespace

std::string weights_path_for(const std::string& save_weights, int rank) {
  std::string path = save_weights;
  const size_t placeholder = path.find(kRankPlaceholder);
  if (placeholder == std::string::npos) return rank == 0 ? path : std::string();
  path.replace(placeholder, std::char_traits<char>::length(kRankPlaceholder), std::to_string(rank));
  return path;
}

std::string output_path_problem(const TrainOptions& options, int rank) {
  // --eval writes neither checkpoints nor weights.
  if (options.eval_only) return {};
  try {
    if (rank == 0 && !options.checkpoint_dir.empty()) check_checkpoint_dir(options.checkpoint_dir);
    const std::string weights = weights_path_for(options.save_weights, rank);
    if (rank == 0 && !weights.empty() && !options.log_json.empty())
      check_distinct(weights, options.log_json);
    if (!weights.empty()) {
      try {
        AtomicFileWriter::check_target(weights);
      } catch (const Error& failed) {
        fail("--save-weights: ", failed.what(),
             " (checked before training, so that the weights of a "
             "whole run are not lost at its end)");
      }
    }
  } catch (const Error& problem) {
    return problem.what();
  }
  return {};
}

}  // namespace rddp
