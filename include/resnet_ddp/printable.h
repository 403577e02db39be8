#pragma once
// Text from the file system (file and folder names, lines of a data file) as it may be shown:
// control characters written out (\n, \t, \x1b; U+0080..U+009F as \u009b), so that a file name
// holding a newline or a terminal escape cannot split a message into lines that pass for other
// output, or drive the terminal that shows it. Other bytes, UTF-8 included, stay as they are;
// text without control characters comes back unchanged, so applying it twice is harmless.
#include <string>

namespace rddp {

std::string printable(const std::string& text);

}  // namespace rddp
