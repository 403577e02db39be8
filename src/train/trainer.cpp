#include "resnet_ddp/train/trainer.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "resnet_ddp/cuda/device.h"
#include "resnet_ddp/data/data_config.h"
#include "resnet_ddp/engine_factory.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/train/console.h"
#include "resnet_ddp/train/lr_schedule.h"
#include "resnet_ddp/weights.h"

namespace rddp {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

std::string percent(int64_t part, int64_t whole) {
  return whole > 0 ? fixed(100.0 * part / whole, 2) + "%" : "-";
}

double mean_loss(const Metrics& m) { return m.count > 0 ? m.loss_sum / m.count : 0.0; }

DeviceKind choose_device(DeviceChoice choice, std::string* why) {
  std::string reason;
  const int devices = cuda_device_count_or_zero(&reason);
  switch (choice) {
    case DeviceChoice::cpu:
      *why = "--device cpu";
      return DeviceKind::cpu;
    case DeviceChoice::cuda:
      if (devices == 0)
        fail("--device cuda: no CUDA device answers (", reason, "); check nvidia-smi, CUDA_VISIBLE_DEVICES ",
             "and the job's GPU request (e.g. srun --gpus-per-task=1), or use --device cpu");
      *why = "--device cuda";
      return DeviceKind::cuda;
    case DeviceChoice::automatic:
      break;
  }
  if (devices > 0) {
    *why = "auto: " + std::to_string(devices) + " CUDA device(s) visible";
    return DeviceKind::cuda;
  }
  *why = "auto: no CUDA device answers (" + reason + ")";
  return DeviceKind::cpu;
}

// JSON-lines metrics file written by rank 0, one object per line.
class MetricsLog {
 public:
  MetricsLog(const std::string& path, bool active) {
    if (path.empty() || !active) return;
    file_.open(path, std::ios::app);
    if (!file_) fail("--log-json: cannot open '", path, "' for appending; check the directory exists and is writable");
  }
  void write(const std::string& json_object) {
    if (!file_.is_open()) return;
    file_ << json_object << '\n';
    file_.flush();
  }

 private:
  std::ofstream file_;
};

// The one-line summary of a window of steps or an epoch.
std::string metrics_json(const char* type, int epoch, int64_t global_step, double lr, const Metrics& m,
                         double images_per_s) {
  std::ostringstream out;
  out << "{\"type\":\"" << type << "\",\"epoch\":" << epoch << ",\"global_step\":" << global_step
      << ",\"lr\":" << lr << ",\"loss\":" << mean_loss(m) << ",\"accuracy\":"
      << (m.count ? static_cast<double>(m.correct) / m.count : 0.0) << ",\"images_per_s\":" << images_per_s << "}";
  return out.str();
}

HostBatch host_batch(const data::Batch& batch) {
  HostBatch host;
  host.size = static_cast<int>(batch.count);
  host.channels = batch.channels;
  host.height = batch.height;
  host.width = batch.width;
  host.images = batch.input;
  host.labels = batch.labels;
  return host;
}

// Evaluates the validation split on every rank; returns the sums over all ranks.
Metrics evaluate(Engine& engine, data::Loader& loader, ProcessGroup& group, int epoch) {
  loader.start_epoch(static_cast<uint64_t>(epoch));
  while (auto lease = loader.next()) engine.eval_step(host_batch(*lease));
  return group.sum(engine.take_metrics());
}

}  // namespace

int run_training(const TrainOptions& options, ProcessGroup& group) {
  const Console console(group.rank(), group.size(), group.host());

  std::string device_reason;
  const DeviceKind device = choose_device(options.device, &device_reason);

  data::DataConfig data_config = options.data;
  data_config.ranks_on_node = group.ranks_on_node();
  data_config.seed = options.seed;
  const data::OpenedData data = data::open_data(data_config);
  const int image_size = data.train_transform.size;
  auto allocator = device == DeviceKind::cuda ? data::make_pinned_allocator() : data::make_plain_allocator();
  std::unique_ptr<data::Loader> train_loader =
      data::make_train_loader(data_config, data, group.rank(), group.size(), allocator);
  std::unique_ptr<data::Loader> val_loader =
      data.val ? data::make_val_loader(data_config, data, group.rank(), group.size(), allocator) : nullptr;
  const int64_t steps_per_epoch = static_cast<int64_t>(train_loader->steps_per_epoch());
  group.require_same(steps_per_epoch, "training steps per epoch");

  EngineConfig engine_config;
  engine_config.spec.stem = options.stem == "auto" ? (image_size <= 64 ? Stem::cifar : Stem::imagenet)
                                                  : parse_stem(options.stem);
  engine_config.spec.in_channels = data.channels;
  engine_config.spec.num_classes = data.num_classes;
  engine_config.max_batch = static_cast<int>(data_config.batch_size);
  engine_config.height = engine_config.width = image_size;
  engine_config.optimizer = options.optimizer;
  engine_config.label_smoothing = options.label_smoothing;
  engine_config.allow_tf32 = options.precision == Precision::tf32;
  engine_config.device_index = group.local_rank();
  std::unique_ptr<Engine> engine = make_engine(device, engine_config, options.seed);

  std::string init_note = "torchvision's, seed " + std::to_string(options.seed);
  if (!options.init_path.empty()) {
    ModelState<float> model(engine_config.spec);
    OptimizerState unused;
    engine->save_state(model, unused);
    LoadOptions load_options;
    load_options.reinit_classifier_on_mismatch = options.init_reset_classifier;
    load_options.reinit_seed = options.seed;
    const LoadReport report = load_weights(options.init_path, model, load_options);
    engine->load_state(model, nullptr);
    init_note = options.init_path;
    for (const std::string& action : report.actions) console.info("init: " + action);
  }
  group.attach(*engine);

  const LrScheduleFn schedule(options, steps_per_epoch);
  console.table("resnet_ddp", {
      {"world size", std::to_string(group.size()) + (group.size() > 1 ? " ranks" : " rank")},
      {"device", std::string(to_string(device)) + " (" + engine->device_name() + "; " + device_reason + ")"},
      {"data", data.train->description()},
      {"validation", data.val ? data.val->description() : "none"},
      {"model", "ResNet-18, " + spec_summary(engine_config.spec) + ", " +
                    std::to_string(engine->layout().parameter_count()) + " parameters"},
      {"init", init_note},
      {"train transform", data::to_string(data.train_transform)},
      {"eval transform", data::to_string(data.eval_transform)},
      {"batch size", std::to_string(data_config.batch_size) + " per rank, " +
                         std::to_string(data_config.batch_size * group.size()) + " effective"},
      {"steps", std::to_string(steps_per_epoch) + " per epoch x " + std::to_string(options.epochs) + " epochs" +
                    (options.max_steps ? ", at most " + std::to_string(options.max_steps) : "")},
      {"optimizer", std::string(to_string(options.optimizer.kind)) + ", lr " + fixed(options.optimizer.lr, 6) +
                        ", weight decay " + fixed(options.optimizer.weight_decay, 6) +
                        (options.optimizer.kind == OptimizerKind::sgd
                             ? ", momentum " + fixed(options.optimizer.momentum, 3) +
                                   (options.optimizer.nesterov ? " (nesterov)" : "")
                             : ", betas " + fixed(options.optimizer.beta1, 3) + "/" +
                                   fixed(options.optimizer.beta2, 4) + ", eps " + std::to_string(options.optimizer.eps))},
      {"lr schedule", std::string(to_string(options.lr_schedule)) +
                          (options.warmup_epochs > 0 ? ", warm-up " + fixed(options.warmup_epochs, 2) + " epochs" : "")},
      {"label smoothing", fixed(options.label_smoothing, 3)},
      {"precision", to_string(options.precision)},
      {"loader", std::to_string(train_loader->workers()) + " worker threads per rank, " + allocator->description() +
                     " batch buffers"},
      {"communication", group.size() > 1 ? group.describe() : "none (one rank)"},
  });

  MetricsLog metrics_log(options.log_json, console.is_main());
  if (options.eval_only) {
    if (!val_loader) fail("--eval: the data set has no validation split; add --val-split FRACTION");
    const Metrics val = evaluate(*engine, *val_loader, group, 0);
    console.info("validation: loss " + fixed(mean_loss(val), 4) + ", accuracy " + percent(val.correct, val.count));
    metrics_log.write(metrics_json("eval", 0, 0, 0.0, val, 0.0));
    return 0;
  }

  int64_t global_step = 0;
  Metrics last_val;
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    if (options.max_steps > 0 && global_step >= options.max_steps) break;
    const Clock::time_point epoch_start = Clock::now();
    Clock::time_point window_start = epoch_start;
    train_loader->start_epoch(static_cast<uint64_t>(epoch));
    Metrics epoch_local, window;
    double data_wait = 0;
    int64_t step = 0;
    double lr = schedule.at(global_step);
    while (auto lease = train_loader->next()) {
      data_wait += lease->wait_seconds;
      lr = schedule.at(global_step);
      engine->train_step(host_batch(*lease), lr, group.step_hooks());
      ++step;
      ++global_step;
      const bool last = step == steps_per_epoch || global_step == options.max_steps;
      if (step % options.print_every == 0 || last) {
        // Rank 0's own running metrics: a progress line needs no collective.
        const Metrics recent = engine->take_metrics();
        epoch_local += recent;
        window += recent;
        const double images_per_s = window.count * group.size() / seconds_since(window_start);
        console.progress("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(options.epochs) + " step " +
                         std::to_string(step) + "/" + std::to_string(steps_per_epoch) + "  loss " +
                         fixed(mean_loss(window), 4) + "  acc " + percent(window.correct, window.count) +
                         "  lr " + fixed(lr, 6) + "  " + fixed(images_per_s, 0) + " img/s");
        metrics_log.write(metrics_json("step", epoch + 1, global_step, lr, window, images_per_s));
        window = Metrics{};
        window_start = Clock::now();
      }
      if (global_step == options.max_steps) break;
    }
    const double train_seconds = seconds_since(epoch_start);
    const Metrics train = group.sum(epoch_local);
    Metrics val;
    if (val_loader) val = evaluate(*engine, *val_loader, group, epoch);
    last_val = val;
    console.end_progress();
    const double images_per_s = train.count / train_seconds;
    console.info("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(options.epochs) + ": train loss " +
                 fixed(mean_loss(train), 4) + " acc " + percent(train.correct, train.count) +
                 (val_loader ? " | val loss " + fixed(mean_loss(val), 4) + " acc " + percent(val.correct, val.count)
                             : "") +
                 " | " + fixed(train_seconds, 1) + " s, " + fixed(images_per_s, 0) + " img/s, data wait " +
                 fixed(100.0 * data_wait / train_seconds, 1) + "%");
    std::ostringstream epoch_json;
    epoch_json << "{\"type\":\"epoch\",\"epoch\":" << epoch + 1 << ",\"global_step\":" << global_step
               << ",\"lr\":" << lr << ",\"train_loss\":" << mean_loss(train) << ",\"train_accuracy\":"
               << (train.count ? double(train.correct) / train.count : 0.0) << ",\"val_loss\":"
               << mean_loss(val) << ",\"val_accuracy\":" << (val.count ? double(val.correct) / val.count : 0.0)
               << ",\"seconds\":" << train_seconds << ",\"images_per_s\":" << images_per_s
               << ",\"data_wait_share\":" << data_wait / train_seconds << "}";
    metrics_log.write(epoch_json.str());
  }

  if (!options.save_weights.empty()) {
    ModelState<float> model(engine_config.spec);
    OptimizerState optimizer_state;
    engine->save_state(model, optimizer_state);
    if (console.is_main()) {
      save_weights(options.save_weights, model);
      console.info("weights written to " + options.save_weights);
    }
  }
  if (val_loader)
    console.info("final validation accuracy " + percent(last_val.correct, last_val.count) + " (loss " +
                 fixed(mean_loss(last_val), 4) + ")");
  return 0;
}

}  // namespace rddp
