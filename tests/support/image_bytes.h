#pragma once
// Decoding an image file held in a string, for the decoder tests: the image, or the message of
// the error that refused it.
#include <string>

#include "resnet_ddp/data/image_decode.h"
#include "resnet_ddp/error.h"

namespace rddp::test {

inline data::Image decode_bytes(const std::string& file, int channels, const std::string& what) {
  return data::decode_image(reinterpret_cast<const uint8_t*>(file.data()), file.size(),
                            channels, what);
}

// The message that refused `file` decoded to RGB, or "(decoded)".
inline std::string decode_error(const std::string& file, const std::string& what) {
  try {
    decode_bytes(file, 3, what);
  } catch (const Error& error) {
    return error.what();
  }
  return "(decoded)";
}

}  // namespace rddp::test
