#pragma once
// Checks of image data before stb_image reads it, for bugs of stb_image 2.27, the version
// Debian 12 ships; later versions refuse these inputs themselves (JPEGs never reach stb_image:
// libjpeg decodes them, jpeg_decode.h):
//  - a PGM/PPM header number beyond INT_MAX overflows a signed int (undefined behaviour);
//  - PGM/PPM pixel data shorter than the header says leaves the image's memory as malloc
//    returned it, so that a truncated file decodes to whatever the heap held;
//  - 16-bit PGM/PPM samples are read in the wrong byte order, and converting their channels
//    (to RGB or to greyscale) reads past the end of the converted buffer.
#include <cstddef>
#include <cstdint>

namespace rddp::data {

// What is wrong with `bytes` in one of those ways, or nullptr when stb_image may read them.
// Data of other formats, or that stb_image refuses for other reasons, pass.
const char* stb_image_hazard(const uint8_t* bytes, size_t size);

}  // namespace rddp::data
