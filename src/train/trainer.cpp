#include "resnet_ddp/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <optional>

#include "resnet_ddp/cuda/cuda_engine.h"
#include "resnet_ddp/cuda/graph_step_policy.h"
#include "resnet_ddp/data/data_config.h"
#include "resnet_ddp/ddp/fatal.h"
#include "resnet_ddp/engine_factory.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/model_flops.h"
#include "resnet_ddp/printable.h"
#include "resnet_ddp/profile_range.h"
#include "resnet_ddp/train/batch_wait.h"
#include "resnet_ddp/train/checkpoint.h"
#include "resnet_ddp/train/checkpoint_lock.h"
#include "resnet_ddp/train/console.h"
#include "resnet_ddp/train/data_starvation.h"
#include "resnet_ddp/train/device_choice.h"
#include "resnet_ddp/train/lr_schedule.h"
#include "resnet_ddp/train/metrics_log.h"
#include "resnet_ddp/train/output_paths.h"
#include "resnet_ddp/train/preemption.h"
#include "resnet_ddp/train/profiler_window.h"
#include "resnet_ddp/train/rank_agreement.h"
#include "resnet_ddp/train/rank_settings.h"
#include "resnet_ddp/train/replica_check.h"
#include "resnet_ddp/train/run_text.h"
#include "resnet_ddp/train/settings_table.h"
#include "resnet_ddp/train/shared_folder_listing.h"
#include "resnet_ddp/train/stem_choice.h"
#include "resnet_ddp/version.h"
#include "resnet_ddp/weights.h"

namespace rddp {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

HostBatch host_batch(const data::Batch& batch, BatchInput input) {
  HostBatch host;
  host.size = static_cast<int>(batch.count);
  host.channels = batch.channels;
  host.height = batch.height;
  host.width = batch.width;
  if (input == BatchInput::pixels)
    host.pixels = batch.pixels;
  else
    host.images = batch.input;
  host.labels = batch.labels;
  return host;
}

class Trainer {
 public:
  Trainer(const TrainOptions& options, ProcessGroup& group)
      : options_(options), group_(group), console_(group.rank(), group.size(), group.host()) {}

  int run();

 private:
  // The settings every rank compares with rank 0's before it opens the data: the command
  // line, the device, and the kind of data its --data holds (the kinds list their files in
  // different collectives).
  RankSettings startup_settings() const;
  // Checks what the run will write (output_paths.h) and opens the metrics log, before any work;
  // a problem on any rank stops every rank.
  void open_outputs();
  void log(const JsonLine& record);
  void open_data();
  // What the engine will be (model, image size, optimizer, precision), before it is made.
  void configure_engine();
  void make_engine_and_state();
  // A run resumed with other settings than the checkpoint's (a job script edited between
  // requeues) says which: some are meant (more --epochs), others change what is trained.
  void warn_of_changed_settings(const TrainPosition& saved) const;
  void check_gpu_only_options() const;
  StepHooks* train_step_hooks();
  void report_cuda_graphs() const;
  void report_conv_api() const;
  void show_settings() const;
  // The metrics log's first record: what this run trains, where and how.
  JsonLine start_record() const;
  // The job's validation metrics, or nothing when a preemption request stopped the evaluation:
  // the ranks agree after every batch, so that a signal ends a long evaluation in seconds.
  std::optional<Metrics> evaluate(int64_t epoch);
  // Says on rank 0 that the run stops for a preemption request, `where` ("at epoch 2 step 5").
  void announce_preemption(const std::string& where) const;
  // This rank's metrics since the last call; a loss that is no longer finite stops training.
  Metrics take_checked_metrics(int64_t epoch, int64_t step, double lr);
  // Where a checkpoint may be written, `epoch` whole epochs and `step_in_epoch` steps in; every
  // rank calls it. With several ranks, every rank's weights and optimizer state are compared with
  // rank 0's first (replica_check.h), so that no checkpoint holds replicas that drifted apart and
  // --resume starts from one that does not; then rank 0 writes the checkpoint when
  // --checkpoint-dir is set. One download of the engine's state serves both. `always_compare`
  // compares without --checkpoint-dir too (each epoch's end).
  void checkpoint(int64_t epoch, int64_t step_in_epoch, bool always_compare = false);

  const TrainOptions& options_;
  ProcessGroup& group_;
  Console console_;
  std::unique_ptr<MetricsLog> metrics_log_;
  std::unique_ptr<CheckpointDirLock> checkpoint_lock_;  // rank 0's, while it may write checkpoints
  RankSettings run_settings_;  // what the ranks agreed on; each checkpoint records them

  DeviceKind device_ = DeviceKind::cpu;
  std::string device_reason_;
  int device_index_ = 0;  // this rank's GPU, once chosen
  data::DataConfig data_config_;
  data::OpenedData data_;
  std::shared_ptr<data::HostAllocator> allocator_;
  std::unique_ptr<data::Loader> train_loader_, val_loader_;
  int64_t steps_per_epoch_ = 0;
  EngineConfig engine_config_;
  std::unique_ptr<Engine> engine_;
  // What MFU is taken against: the device's peak at the run's precision, and the model's
  // training FLOPs per image at the run's image size.
  DevicePeak peak_;
  double flops_per_image_ = 0;
  // The --init file, read once: it chooses the stem under --stem auto, then gives the weights.
  std::optional<TensorFile> init_file_;
  std::string init_note_;
  TrainPosition start_;  // where training begins (after --resume, where it left off)
  int64_t global_step_ = 0;
  int64_t last_finite_step_ = 0;  // global step of the last metrics read with a finite loss
};

void Trainer::open_outputs() {
  std::string problem = output_path_problem(options_, group_.rank());
  try {
    if (problem.empty())
      metrics_log_ = std::make_unique<MetricsLog>(options_.log_json, console_.is_main());
    if (problem.empty() && console_.is_main() && !options_.eval_only &&
        !options_.checkpoint_dir.empty())
      checkpoint_lock_ = std::make_unique<CheckpointDirLock>(options_.checkpoint_dir);
  } catch (const Error& error) {
    problem = error.what();
  }
  refuse_together(group_, problem, "the check of the output paths");
  if (!checkpoint_lock_) return;
  if (!checkpoint_lock_->note().empty()) console_.warn(checkpoint_lock_->note());
  for (const std::string& name : remove_stale_temporaries(options_.checkpoint_dir))
    console_.info("removed " + printable(name) + " from " + printable(options_.checkpoint_dir) +
                  ": the temporary of a checkpoint write that a stopped run left");
}

void Trainer::log(const JsonLine& record) {
  const std::string problem = metrics_log_->write(record);
  if (!problem.empty()) console_.warn(problem);
}

void Trainer::open_data() {
  data_config_ = options_.data;
  data_config_.ranks_on_node = group_.ranks_on_node();
  data_config_.seed = options_.seed;
  // A GPU normalises the uint8 pixels itself, in the pass that converts its input anyway: the
  // loader's threads skip the float pass over every image, and a quarter of the bytes cross the
  // bus. The CPU engine takes float batches, normalised by the loader's threads beside training.
  data_config_.make_float = device_ != DeviceKind::cuda;
  data_config_.list_folder = rank0_folder_lister(group_);
  data_ = data::open_data(data_config_);
  allocator_ = device_ == DeviceKind::cuda ? data::make_pinned_allocator() : data::make_plain_allocator();
  train_loader_ = data::make_train_loader(data_config_, data_, group_.rank(), group_.size(), allocator_);
  if (data_.val)
    val_loader_ = data::make_val_loader(data_config_, data_, group_.rank(), group_.size(), allocator_);
  steps_per_epoch_ = static_cast<int64_t>(train_loader_->steps_per_epoch());
}

RankSettings Trainer::startup_settings() const {
  RankSettings settings = command_line_settings(options_, device_);
  std::string kind = to_string(options_.data.kind);
  if (options_.data.kind == data::DatasetKind::automatic) {
    try {
      kind = to_string(data::detect_dataset_kind(options_.data.path));
    } catch (const Error& error) {
      kind = std::string("none: ") + error.what();  // opening the data says it again, on every rank
    }
  }
  settings.push_back({"data kind", kind});
  return settings;
}

// Options that only mean something to the CUDA engine are refused, not ignored, when the run
// trains on the CPU.
void Trainer::check_gpu_only_options() const {
  if (device_ != DeviceKind::cuda) refuse_gpu_flags_on_cpu(options_, device_reason_);
}

// What --cuda-graphs on did: a capture that fails falls back to eager steps with one warning,
// which a long log can bury, so the end of training says how many steps the graph ran.
void Trainer::report_cuda_graphs() const {
  if (!options_.cuda.cuda_graphs || !console_.is_main()) return;
  const CudaGraphStats stats = cuda_graph_stats(*engine_);
  const int64_t steps = stats.replays + stats.eager_steps;
  std::string line = "cuda graphs: " + std::to_string(stats.replays) + " of " + std::to_string(steps) +
                     " training steps replayed from the graph";
  if (stats.captures > 0) line += " (" + std::to_string(stats.graph_nodes) + " nodes)";
  if (!stats.capture_failure.empty()) line += "; the capture failed: " + stats.capture_failure;
  console_.info(line);
}

// What --conv-api graph did: a convolution the graph API has no plan for runs on the legacy
// API's algorithm, so the end of training says how many did, and why the first one did.
void Trainer::report_conv_api() const {
  if (options_.cuda.conv_api != cuda::ConvApi::graph || !console_.is_main()) return;
  const cuda::ConvAlgorithmCache::ApiUse use = cuda_conv_api_use(*engine_);
  std::string line = "convolutions: " + std::to_string(use.graph_plans) +
                     " on plans of cuDNN's graph API, " + std::to_string(use.legacy_algorithms) +
                     " on legacy algorithms";
  if (!use.first_fallback.empty()) line += " (the first: " + use.first_fallback + ")";
  console_.info(line);
}

// With one rank the reducer's allreduces average over that rank alone, which changes no bit of
// the gradients, and it broadcasts nothing before a step; graphed steps go without it, so that
// the graph holds no collective at all. With more ranks the reducer's allreduces are captured
// with the step (dist/reducer.h).
StepHooks* Trainer::train_step_hooks() {
  if (options_.cuda.cuda_graphs && group_.size() == 1) return nullptr;
  return group_.step_hooks();
}

void Trainer::configure_engine() {
  const int image_size = data_.train_transform.size;
  if (!options_.init_path.empty()) init_file_ = read_tensor_file(options_.init_path);
  engine_config_.spec.stem =
      choose_stem(options_.stem, image_size, init_file_ ? &*init_file_ : nullptr);
  engine_config_.spec.in_channels = data_.channels;
  engine_config_.spec.num_classes = data_.num_classes;
  engine_config_.max_batch = static_cast<int>(data_config_.batch_size);
  engine_config_.height = engine_config_.width = image_size;
  engine_config_.optimizer = options_.optimizer;
  engine_config_.label_smoothing = options_.label_smoothing;
  engine_config_.input = data_config_.make_float ? BatchInput::normalized_float : BatchInput::pixels;
  engine_config_.pixel_mean = data_.normalization.mean;
  engine_config_.pixel_stddev = data_.normalization.stddev;
  engine_config_.precision = options_.precision;
}

void Trainer::make_engine_and_state() {
  CudaEngineOptions cuda = options_.cuda;
  cuda.device_index = device_index_;
  engine_ = make_engine(device_, engine_config_, cuda, options_.seed);
  peak_ = engine_->peak();
  flops_per_image_ = training_flops_per_image(describe(engine_config_.spec), engine_config_.height);

  init_note_ = "torchvision's, seed " + std::to_string(options_.seed);
  start_.world_size = group_.size();
  start_.batch_size = static_cast<int64_t>(data_config_.batch_size);
  start_.seed = options_.seed;
  if (init_file_) {
    ModelState<float> model(engine_config_.spec);
    OptimizerState unused;
    engine_->save_state(model, unused);
    LoadOptions load_options;
    load_options.reinit_classifier_on_mismatch = options_.init_reset_classifier;
    load_options.reinit_seed = options_.seed;
    const LoadReport report = load_weights(*init_file_, model, load_options);
    engine_->load_state(model, nullptr);
    init_note_ = printable(options_.init_path);
    for (const std::string& action : report.actions) console_.info("init: " + action);
  } else if (options_.resume) {
    // Every rank reads the checkpoint itself: a directory local to each node may hold another
    // one, or none, on another rank.
    std::string resumed_from = "none (no checkpoint in the directory yet)";
    if (list_checkpoints(options_.checkpoint_dir).empty()) {
      console_.info("resume: no checkpoint in " + printable(options_.checkpoint_dir) +
                    " yet; starting from the beginning");
    } else {
      ModelState<float> model(engine_config_.spec);
      OptimizerState optimizer;
      engine_->save_state(model, optimizer);
      const ResumedCheckpoint resumed = load_latest_checkpoint(options_.checkpoint_dir, model, options_.optimizer, optimizer);
      for (const std::string& note : resumed.notes) console_.warn("resume: " + note);
      engine_->load_state(model, &optimizer);
      const TrainPosition& saved = resumed.position;
      resumed_from = resumed.path + " at global step " + std::to_string(saved.global_step);
      warn_of_changed_settings(saved);
      start_.epoch = saved.epoch;
      start_.step_in_epoch = saved.step_in_epoch;
      start_.global_step = saved.global_step;
      const bool same_order = saved.world_size == group_.size() &&
                              saved.batch_size == static_cast<int64_t>(data_config_.batch_size);
      // Written at an epoch's end before its evaluation (preempted then): the whole epoch carries
      // over to a job of any shape, and the run starts with its evaluation, training nothing.
      const bool trained_unevaluated =
          saved.steps_per_epoch > 0 && saved.step_in_epoch >= saved.steps_per_epoch;
      if (trained_unevaluated) {
        start_.step_in_epoch = steps_per_epoch_;
        if (!same_order) start_.global_step = (saved.epoch + 1) * steps_per_epoch_;
        console_.info("resume: epoch " + std::to_string(saved.epoch + 1) +
                      " was trained but not evaluated when the checkpoint was written; its "
                      "evaluation comes first");
      } else if (start_.step_in_epoch > 0 && !same_order) {
        // A partial epoch's remaining samples depend on the world size and batch size that
        // split it; only whole epochs carry over to another job shape.
        console_.info("resume: the checkpoint was written mid-epoch by " + std::to_string(saved.world_size) +
                      " rank(s) with batch " + std::to_string(saved.batch_size) + "; with this job's shape epoch " +
                      std::to_string(saved.epoch + 1) + " starts again from its first step");
        start_.step_in_epoch = 0;
        start_.global_step = saved.epoch * steps_per_epoch_;
      }
      if (start_.step_in_epoch >= steps_per_epoch_ && !trained_unevaluated) {
        ++start_.epoch;
        start_.step_in_epoch = 0;
      }
      init_note_ = printable(resumed.path) + " (epoch " + std::to_string(start_.epoch + 1) +
                   ", step " + std::to_string(start_.step_in_epoch) + ", global step " +
                   std::to_string(start_.global_step) + ")";
    }
    require_rank0_settings(group_, {{"checkpoint resumed from", resumed_from}}, "on --resume");
  }
  group_.attach(*engine_);
}

void Trainer::warn_of_changed_settings(const TrainPosition& saved) const {
  if (saved.run_settings.empty()) {  // a checkpoint of an older build records the seed alone
    if (saved.seed != options_.seed)
      console_.warn("resume: the checkpoint was written with --seed " + std::to_string(saved.seed) +
                    ", this run uses " + std::to_string(options_.seed) +
                    ": the data order changes");
    return;
  }
  RankSettings then;
  try {
    then = decode_settings(saved.run_settings);
  } catch (const Error&) {
    console_.warn(
        "resume: the settings recorded in the checkpoint cannot be read; they are not compared");
    return;
  }
  // How a run starts, not what it trains.
  const auto how_started = [](const RankSetting& setting) { return setting.name == "--resume"; };
  RankSettings now = run_settings_;
  now.erase(std::remove_if(now.begin(), now.end(), how_started), now.end());
  then.erase(std::remove_if(then.begin(), then.end(), how_started), then.end());
  const std::vector<SettingDifference> changed = setting_differences(then, now);
  if (!changed.empty() && console_.is_main())
    console_.warn(
        "resume: this run's settings differ from those of the run that wrote the checkpoint: " +
        describe_differences(changed, "now", "then") +
        ". Training goes on with this run's; if that was not meant, start it with the earlier "
        "ones");
}

void Trainer::show_settings() const {
  SettingsFacts facts{options_, engine_config_, data_, data_config_};
  facts.world_size = group_.size();
  facts.nodes = group_.nodes();
  facts.communication = group_.describe();
  facts.device = device_;
  facts.device_reason = device_reason_;
  facts.device_name = engine_->device_name();
  if (device_ == DeviceKind::cuda)
    facts.precision_meaning =
        cuda::precision_description(options_.precision, cuda_device_capabilities(*engine_));
  facts.parameters = engine_->layout().parameter_count();
  facts.peak = peak_;
  facts.flops_per_image = flops_per_image_;
  facts.start = init_note_;
  facts.steps_per_epoch = steps_per_epoch_;
  facts.loader_workers = train_loader_->workers();
  facts.batch_buffers = allocator_->description();
  console_.table("resnet_ddp", settings_rows(facts));
}

JsonLine Trainer::start_record() const {
  const CudaEngineOptions& cuda = options_.cuda;
  JsonLine record;
  record.string("type", "start")
      .string("version", kVersion)
      .integer("world_size", group_.size())
      .string("device", to_string(device_))
      .string("device_name", engine_->device_name())
      .number("peak_tflops", peak_.tflops > 0 ? peak_.tflops : NAN)
      .string("data", options_.data.path)
      .string("dataset", data_.train->description())
      .integer("train_images", static_cast<long long>(data_.train->size()))
      .integer("val_images", data_.val ? static_cast<long long>(data_.val->size()) : 0)
      .integer("classes", engine_config_.spec.num_classes)
      .integer("image_size", engine_config_.height)
      .string("stem", to_string(engine_config_.spec.stem))
      .integer("batch_size", static_cast<long long>(data_config_.batch_size))
      .integer("epochs", options_.epochs)
      .integer("steps_per_epoch", steps_per_epoch_)
      .string("precision", to_string(options_.precision))
      .string("optimizer", to_string(options_.optimizer.kind))
      .number("lr", options_.optimizer.lr)
      .integer("seed", static_cast<long long>(options_.seed))
      .number("flops_per_image", flops_per_image_);
  if (device_ == DeviceKind::cuda)
    record.string("memory_format", to_string(cuda.memory_format))
        .string("batchnorm", to_string(cuda.batchnorm))
        .string("conv_api", cuda::to_string(cuda.conv_api))
        .boolean("cuda_graphs", cuda.cuda_graphs);
  return record;
}

Metrics Trainer::take_checked_metrics(int64_t epoch, int64_t step, double lr) {
  // Under fp16 a step with a non-finite loss is skipped by the loss scaling and left out of the
  // loss sums by the engine (counted in nonfinite_losses), so the check below only stops the
  // other precisions; fp16 reports its skipped steps with each epoch instead.
  const Metrics metrics = engine_->take_metrics();
  if (!std::isfinite(metrics.loss_sum))
    fail("the training loss became ", std::isnan(metrics.loss_sum) ? "NaN" : "infinite", " in epoch ", epoch + 1,
         " between global steps ", last_finite_step_ + 1, " and ", global_step_, " (step ", step,
         " of the epoch); training stops. Lower the learning rate (now ", general(lr),
         "), add --warmup-epochs, or check the data (normalisation, labels)",
         options_.checkpoint_dir.empty() ? "" : "; --resume continues from the last checkpoint");
  last_finite_step_ = global_step_;
  return metrics;
}

std::optional<Metrics> Trainer::evaluate(int64_t epoch) {
  const ProfileRange range("evaluate");
  console_.progress("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(options_.epochs) +
                    ": evaluating on " + std::to_string(data_.val->size()) + " validation images");
  group_.sync_buffers();
  val_loader_->start_epoch(static_cast<uint64_t>(epoch));
  while (auto lease = next_batch(*val_loader_, group_.size())) {
    engine_->eval_step(host_batch(*lease, engine_config_.input));
    if (group_.any(preemption_requested())) {
      engine_->take_metrics();  // the evaluation's part sums, which no one reads
      return std::nullopt;
    }
  }
  return group_.sum(engine_->take_metrics());
}

void Trainer::announce_preemption(const std::string& where) const {
  console_.end_progress();
  console_.info("preempted (" + preemption_cause() + ") " + where +
                ": checkpointing and exiting with code " + std::to_string(kExitPreempted) +
                "; continue with --resume");
  if (options_.checkpoint_dir.empty())
    console_.warn("preempted without --checkpoint-dir: nothing is saved, the run will start over");
}

void Trainer::checkpoint(int64_t epoch, int64_t step_in_epoch, bool always_compare) {
  const bool write = !options_.checkpoint_dir.empty();
  const bool compare = group_.size() > 1 && (write || always_compare);
  if (!write && !compare) return;
  const ProfileRange range("checkpoint");
  ModelState<float> model(engine_config_.spec);
  OptimizerState optimizer;
  if (compare || console_.is_main()) engine_->save_state(model, optimizer);
  if (compare) {
    const std::string when = step_in_epoch == 0 ? "after epoch " + std::to_string(epoch)
                                                : "at step " + std::to_string(step_in_epoch) + " of epoch " +
                                                      std::to_string(epoch + 1);
    const ProfileRange comparing("replica check");
    check_replicas_agree(model, optimizer, group_, when + " (global step " + std::to_string(global_step_) + ")");
  }
  if (!write) return;
  if (console_.is_main()) {
    TrainPosition position = start_;
    position.epoch = epoch;
    position.step_in_epoch = step_in_epoch;
    position.global_step = global_step_;
    position.steps_per_epoch = steps_per_epoch_;
    position.run_settings = encode_settings(run_settings_);
    const std::string path = save_checkpoint(options_.checkpoint_dir, model, options_.optimizer, optimizer,
                                             position, options_.keep_checkpoints);
    console_.info("checkpoint " + printable(path));
  }
  // No rank may leave (a preempted job exits next) before the checkpoint is on disk: a rank
  // that exits early can make the launcher end rank 0 in the middle of the write.
  group_.barrier("checkpoint at step " + std::to_string(global_step_));
}

int Trainer::run() {
  // From the start: a job preempted while it lists its data or evaluates ends in seconds too,
  // with the code that requeues it.
  install_preemption_handlers(console_.prefix());
  device_ = choose_device(options_.device, &device_reason_);
  check_gpu_only_options();
  run_settings_ = startup_settings();
  require_rank0_settings(group_, run_settings_, "at start");
  // A GPU that cannot run this build's kernels or this precision is refused before the outputs
  // and the data are opened, which can take minutes for a large image folder.
  device_index_ = group_.prepare_device(device_);
  if (device_ == DeviceKind::cuda) require_capable_device(device_index_, options_.precision);
  open_outputs();
  open_data();
  configure_engine();
  const RankSettings found = data_settings(data_, engine_config_, steps_per_epoch_);
  require_rank0_settings(group_, found, "once the data is open");
  run_settings_.insert(run_settings_.end(), found.begin(), found.end());
  make_engine_and_state();
  show_settings();

  log(start_record());
  const int classes = engine_config_.spec.num_classes;
  if (options_.eval_only) {
    if (!val_loader_) fail("--eval: the data set has no validation split; add --val-split FRACTION");
    const std::optional<Metrics> evaluated = evaluate(0);
    if (!evaluated) {
      announce_preemption("during the evaluation");
      return kExitPreempted;
    }
    const Metrics& val = *evaluated;
    console_.info("validation: loss " + fixed(mean_loss(val), 4) + ", accuracy " + accuracies(val, classes));
    log(JsonLine()
            .string("type", "eval")
            .number("val_loss", mean_loss(val))
            .number("val_accuracy", accuracy(val))
            .number("val_top5_accuracy", top5_accuracy(val)));
    return 0;
  }

  const LrScheduleFn schedule(options_, steps_per_epoch_);
  // Progress lines need the device's metrics, which waits for it: on a terminal a little more
  // often than in a log file, never every step.
  // Rank 0's terminal decides for every rank: each report sums the ranks' metrics.
  const int64_t report_every = std::stoll(group_.broadcast_from_rank0(
      std::to_string(console_.interactive() ? std::min(options_.print_every, 10) : options_.print_every),
      "steps between progress reports"));
  global_step_ = last_finite_step_ = start_.global_step;
  ProfilerWindow profiler(*engine_, options_.profile_first_step, options_.profile_last_step);
  Metrics last_val;
  bool reached_max_steps = false;
  for (int64_t epoch = start_.epoch; epoch < options_.epochs && !reached_max_steps; ++epoch) {
    const ProfileRange epoch_range("epoch " + std::to_string(epoch + 1));
    const int64_t first_step = epoch == start_.epoch ? start_.step_in_epoch : 0;
    const Clock::time_point epoch_start = Clock::now();
    Clock::time_point window_start = epoch_start;
    train_loader_->start_epoch(static_cast<uint64_t>(epoch), static_cast<size_t>(first_step));
    Metrics epoch_local, window;  // this rank's epoch; the job's report window
    double data_wait = 0, window_wait = 0, lr = schedule.at(global_step_);
    int64_t step = first_step;
    while (true) {
      // A run resumed where --max-steps stopped it trains no further (its evaluation may be due).
      if (options_.max_steps > 0 && global_step_ >= options_.max_steps) {
        reached_max_steps = true;
        break;
      }
      profiler.before_step(global_step_ + 1);
      {
        // The engine has read the batch when train_step returns: the buffer goes back to
        // the loader at once, before anything slow.
        const data::Loader::Lease lease = [&] {
          const ProfileRange range("data wait");
          return next_batch(*train_loader_, group_.size());
        }();
        if (!lease) break;
        data_wait += lease->wait_seconds;
        window_wait += lease->wait_seconds;
        lr = schedule.at(global_step_);
        const ProfileRange range("train step " + std::to_string(global_step_ + 1));
        engine_->train_step(host_batch(*lease, engine_config_.input), lr, train_step_hooks());
      }
      ++step;
      ++global_step_;
      profiler.after_step(global_step_);
      const bool at_max = options_.max_steps > 0 && global_step_ >= options_.max_steps;
      if (step % report_every == 0 || step == steps_per_epoch_ || at_max) {
        // The job's means over the window, as the epoch line gives them: one small sum a report.
        const Metrics recent = [&] {
          const ProfileRange range("read metrics");
          return take_checked_metrics(epoch, step, lr);
        }();
        epoch_local += recent;
        window += group_.sum(recent);
        const double window_seconds = seconds_since(window_start);
        const double images_per_s = window.count / window_seconds;
        const double mfu = model_flop_utilisation(images_per_s / group_.size(), flops_per_image_, peak_.tflops);
        console_.progress("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(options_.epochs) + " step " +
                          std::to_string(step) + "/" + std::to_string(steps_per_epoch_) + "  loss " +
                          fixed(mean_loss(window), 4) + "  acc " + percent(window.correct, window.count) + "  lr " +
                          general(lr) + "  " + fixed(images_per_s, 0) + " img/s" + mfu_part("  ", mfu));
        JsonLine step_json;
        step_json.string("type", "step").number("epoch", epoch + 1).number("global_step", global_step_)
            .number("lr", lr).number("loss", mean_loss(window)).number("accuracy", accuracy(window))
            .number("images_per_s", images_per_s)
            .number("data_wait_share", window_seconds > 0 ? window_wait / window_seconds : 0.0);
        if (std::isfinite(mfu)) step_json.number("mfu", mfu);
        log(step_json);
        window = Metrics{};
        window_wait = 0;
        window_start = Clock::now();
      }
      if (group_.any(preemption_requested())) {
        announce_preemption("at epoch " + std::to_string(epoch + 1) + " step " +
                            std::to_string(step));
        checkpoint(epoch, step);
        return kExitPreempted;
      }
      if (at_max) {
        reached_max_steps = true;
        break;
      }
      if (options_.checkpoint_every > 0 && global_step_ % options_.checkpoint_every == 0 && step < steps_per_epoch_)
        checkpoint(epoch, step);
    }
    {
      // The epoch's last sums: the wait for the GPU to finish the epoch's steps.
      const ProfileRange range("epoch metrics");
      epoch_local += take_checked_metrics(epoch, step, lr);
    }
    const double train_seconds = seconds_since(epoch_start);
    const Metrics train = group_.sum(epoch_local);
    // Rank 0's own share alone would hide a starved rank elsewhere (data_starvation.h).
    const double wait_share = train_seconds > 0 ? data_wait / train_seconds : 0.0;
    const ddp::RankMaximum most_wait = group_.max_over_ranks(wait_share, "largest data-wait share");
    const std::string starved = data_starvation_warning(epoch, group_.rank(), group_.size(), most_wait,
                                                        train_loader_->workers());
    if (!starved.empty()) console_.warn(starved);
    Metrics val;
    if (val_loader_) {
      const std::optional<Metrics> evaluated = evaluate(epoch);
      if (!evaluated) {
        // The checkpoint keeps the epoch's training; --resume evaluates it again.
        announce_preemption("during the evaluation of epoch " + std::to_string(epoch + 1));
        checkpoint(epoch, step);
        return kExitPreempted;
      }
      val = *evaluated;
    }
    last_val = val;
    console_.end_progress();
    const double images_per_s = train.count / train_seconds;
    const double mfu = model_flop_utilisation(images_per_s / group_.size(), flops_per_image_, peak_.tflops);
    const bool loss_scaling = options_.precision == Precision::fp16;
    // An epoch whose steps were all taken before a resume (preempted before its evaluation)
    // has no training figures in this run.
    const bool trained_here = train.count > 0;
    console_.info(
        "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(options_.epochs) + ": " +
        (trained_here ? "train loss " + fixed(mean_loss(train), 4) + " acc " +
                            percent(train.correct, train.count)
                      : std::string("trained before the resume")) +
        (val_loader_
             ? " | val loss " + fixed(mean_loss(val), 4) + " acc " + accuracies(val, classes)
             : "") +
        (trained_here
             ? " | " + fixed(train_seconds, 1) + " s, " + fixed(images_per_s, 0) + " img/s" +
                   mfu_part(", ", mfu) + ", data wait " + fixed(100.0 * wait_share, 1) + "%" +
                   (group_.size() > 1 ? " (most: rank " + std::to_string(most_wait.rank) + ", " +
                                            fixed(100.0 * most_wait.value, 1) + "%)"
                                      : "")
             : std::string()) +
        (loss_scaling ? " | " + std::to_string(train.skipped_steps) + " step(s) skipped" : ""));
    if (loss_scaling && train.skipped_steps > 0 && console_.is_main())
      console_.warn("epoch " + std::to_string(epoch + 1) + ": " + std::to_string(train.skipped_steps) +
                    " optimizer step(s) skipped for Inf/NaN gradients (" + std::to_string(train.nonfinite_losses) +
                    " with a non-finite loss, left out of the mean), each halving the loss scale; a few early "
                    "in training are normal, many mean fp16 overflows: try a lower --lr, or --precision bf16 on "
                    "a GPU of compute capability 8.0 or later");
    JsonLine epoch_json;
    epoch_json.string("type", "epoch").number("epoch", epoch + 1).number("global_step", global_step_)
        .number("lr", lr).number("train_loss", mean_loss(train)).number("train_accuracy", accuracy(train))
        .number("train_top5_accuracy", top5_accuracy(train))
        .number("val_loss", mean_loss(val)).number("val_accuracy", accuracy(val))
        .number("val_top5_accuracy", top5_accuracy(val))
        .number("seconds", train_seconds).number("images_per_s", images_per_s)
        .number("data_wait_share", wait_share)
        .number("data_wait_share_max", most_wait.value)
        .number("data_wait_share_max_rank", static_cast<double>(most_wait.rank));
    if (std::isfinite(mfu)) epoch_json.number("mfu", mfu);
    if (loss_scaling)
      epoch_json.number("skipped_steps", static_cast<double>(train.skipped_steps))
          .number("nonfinite_losses", static_cast<double>(train.nonfinite_losses));
    log(epoch_json);
    // A run stopped by --max-steps mid-epoch saves where it stopped, so --resume carries on.
    if (step < steps_per_epoch_) checkpoint(epoch, step, /*always_compare=*/true);
    else checkpoint(epoch + 1, 0, /*always_compare=*/true);
  }
  const std::string profiler_warning = profiler.finish(start_.global_step + 1, global_step_);
  if (!profiler_warning.empty() && console_.is_main()) console_.warn(profiler_warning);
  report_cuda_graphs();
  report_conv_api();

  // "{rank}" in the name makes every rank write its own copy, to check that they agree.
  const std::string weights_path = weights_path_for(options_.save_weights, group_.rank());
  if (!weights_path.empty()) {
    ModelState<float> model(engine_config_.spec);
    OptimizerState optimizer;
    engine_->save_state(model, optimizer);
    save_weights(weights_path, model);
    console_.info("weights written to " + printable(weights_path));
  }
  if (val_loader_ && last_val.count > 0)
    console_.info("final validation accuracy " + accuracies(last_val, classes) + ", loss " +
                  fixed(mean_loss(last_val), 4));
  if (!metrics_log_->losses().empty()) console_.warn(metrics_log_->losses());
  return 0;
}

}  // namespace

int run_training(const TrainOptions& options, ProcessGroup& group) {
  try {
    return Trainer(options, group).run();
  } catch (const data::DataWaitInterrupted& stuck) {
    const std::string message = preempted_while_stuck(stuck);
    std::fprintf(stderr, "%s %s\n", ddp::rank_prefix().c_str(), message.c_str());
    return kExitPreempted;
  } catch (const PreemptedAtStart& stopped) {
    std::fprintf(stderr, "%s %s\n", ddp::rank_prefix().c_str(), stopped.what());
    return kExitPreempted;
  }
}

}  // namespace rddp
