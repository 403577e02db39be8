#include "resnet_ddp/printable.h"

namespace rddp {

std::string printable(const std::string& text) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const unsigned char next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += {'\\', 'x', digits[c >> 4], digits[c & 15]};
    } else if (c == 0xc2 && next >= 0x80 && next <= 0x9f) {  // C1 controls, in UTF-8
      out += {'\\', 'u', '0', '0', digits[next >> 4], digits[next & 15]};
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace rddp
