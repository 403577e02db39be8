#pragma once
// What a program asked of the emulated GPU: counts of kernels run, cuDNN calls (a convolution
// with its algorithm, determinism, math type and layout), graph launches. Written at exit to the
// file RDDP_EMU_CALL_LOG names, one "COUNT WHAT" line each, so that a test can show what a
// resnet_ddp flag changed in the work the GPU was given. Without the variable nothing is kept.
#include <string>

namespace emu {

bool logging_calls();
// Counts one more `what`; callers build the text only when logging_calls().
void log_call(const std::string& what);

}  // namespace emu
