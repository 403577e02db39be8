# Copies a kernel source (INPUT) to OUTPUT with every launch
#   kernel<targs><<<grid, block, shared, stream>>>(args)
# written as a call of the emulator (tests/emu/cuda_emu.h):
#   kernel<targs> % ::emu::config("kernel", __FILE__, __LINE__, grid, block, shared, stream)
#                 % ::emu::args(args)
# Lines stay where they were and a #line names the original, so compiler messages, __FILE__ and
# sanitizer reports point into kernels/. A launch in a form this does not recognise (a kernel
# named through an expression, template arguments with parentheses or nested <>) stops the build
# rather than slip through.
#   cmake -DINPUT=kernels/x.cu -DOUTPUT=build/.../x.emu.cpp -P rewrite_launches.cmake
if(NOT INPUT OR NOT OUTPUT)
  message(FATAL_ERROR "rewrite_launches.cmake: pass -DINPUT=<kernel source> -DOUTPUT=<copy>")
endif()
file(READ "${INPUT}" text)

string(REGEX MATCHALL "<<<" opens "${text}")
list(LENGTH opens launches)
set(kernel_expression "([A-Za-z_][A-Za-z0-9_:]*)(<[^<>;{}()]*>|)([ \t\r\n]*)<<<")
string(REGEX MATCHALL "${kernel_expression}" recognised "${text}")
list(LENGTH recognised rewritten)
string(REGEX MATCHALL ">>>[ \t\r\n]*\\(" closes "${text}")
list(LENGTH closes closed)
if(NOT launches EQUAL rewritten OR NOT launches EQUAL closed)
  message(FATAL_ERROR "rewrite_launches.cmake: ${INPUT} has ${launches} '<<<', of which "
                      "${rewritten} follow a kernel name the rewrite recognises, and ${closed} "
                      "'>>>(': write each launch as name<args><<<...>>>(...)")
endif()

string(REGEX REPLACE "${kernel_expression}"
       "\\1\\2\\3 % ::emu::config(\"\\1\", __FILE__, __LINE__, " text "${text}")
string(REGEX REPLACE ">>>([ \t\r\n]*)\\(" ")\\1 % ::emu::args(" text "${text}")

file(WRITE "${OUTPUT}.tmp" "#line 1 \"${INPUT}\"\n${text}")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
