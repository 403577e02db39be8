#pragma once
// A model's parameters and BatchNorm buffers in a tensor file, under torchvision's state_dict
// names and in its order, with the model spec in the metadata. Such files convert to and from
// PyTorch with scripts/torchvision_to_resnet_ddp.py and scripts/resnet_ddp_to_torchvision.py.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "resnet_ddp/model_state.h"
#include "resnet_ddp/tensor_file.h"

namespace rddp {

// Metadata keys (docs/file_format.md lists them with their value syntax).
namespace metadata_key {
inline constexpr const char* kind = "kind";  // "weights" or "checkpoint"
inline constexpr const char* stem = "model.stem";
inline constexpr const char* in_channels = "model.in_channels";
inline constexpr const char* num_classes = "model.num_classes";
inline constexpr const char* widths = "model.widths";  // "64,128,256,512"
inline constexpr const char* blocks = "model.blocks";  // "2,2,2,2"
}  // namespace metadata_key

// "stem=cifar in_channels=3 num_classes=10 widths=64,128,256,512 blocks=2,2,2,2"
std::string spec_summary(const ModelSpec& spec);

void put_model_spec(const ModelSpec& spec, std::map<std::string, std::string>& metadata);
// The spec recorded in the metadata; nullopt when the file records none (e.g. it was
// converted by a tool that did not add one). Throws Error if the recorded values are malformed.
std::optional<ModelSpec> stored_model_spec(const TensorFile& file);
// The spec the tensor shapes imply: the stem from conv1.weight's kernel (7x7 imagenet, 3x3
// cifar), in_channels from it too, widths and block counts from the layerN.M tensors, the
// class count from fc.weight. Throws Error naming what is missing or unsupported.
ModelSpec infer_spec(const TensorFile& file);
// The spec the file records, else the one its shapes imply.
ModelSpec file_model_spec(const TensorFile& file);

// Every parameter and buffer of the model (not gradients), in torchvision's state_dict order.
void append_model_tensors(const ModelState<float>& state, TensorFile& file);

// Writes kind=weights, the model spec and `extra_metadata` (which must not reuse those keys),
// and the model's tensors; crash-safe as write_tensor_file.
void save_weights(const std::string& path, const ModelState<float>& state,
                  const std::map<std::string, std::string>& extra_metadata = {});

struct LoadOptions {
  // When the file differs from the model only in the class count, load everything but
  // fc.weight and fc.bias and initialise those as init_torchvision(state, reinit_seed) would.
  bool reinit_classifier_on_mismatch = false;
  uint64_t reinit_seed = 0;
  // Tensors whose names start with one of these belong to someone else (a checkpoint's
  // optimizer state, say) and are neither loaded nor reported as unexpected.
  std::vector<std::string> skip_prefixes;
};

struct LoadReport {
  ModelSpec file_spec;  // what the file holds (recorded, or inferred from the shapes)
  bool classifier_reinitialised = false;
  std::vector<std::string> actions;  // what was done, one human-readable line each
};

// Checks every tensor against the model's layout before changing anything: a spec that
// differs, missing or unexpected tensors, wrong shapes or dtypes throw Error with the file's
// name and what to change; the state is then untouched. f64 values are converted to f32.
LoadReport load_weights(const std::string& path, ModelState<float>& state,
                        const LoadOptions& options = {});
LoadReport load_weights(const TensorFile& file, ModelState<float>& state,
                        const LoadOptions& options = {});

}  // namespace rddp
