# Concatenates the OpenCL C files of DIR (common.cl first, then by name) into a
# C++ source defining anymoe::opencl::OpenClKernelSource(). Run as:
# cmake -DDIR=... -DOUTPUT=... -P embed_kernels.cmake
file(GLOB files "${DIR}/*.cl")
list(SORT files)
list(REMOVE_ITEM files "${DIR}/common.cl")
list(PREPEND files "${DIR}/common.cl")
set(text "")
foreach(f ${files})
  file(READ "${f}" part)
  get_filename_component(name "${f}" NAME)
  string(APPEND text "// ---- ${name}\n${part}\n")
endforeach()
file(WRITE "${OUTPUT}.src" "${text}")
file(READ "${OUTPUT}.src" hex HEX)
file(REMOVE "${OUTPUT}.src")
string(LENGTH "${hex}" hex_len)
math(EXPR size "${hex_len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
string(REGEX REPLACE "(('\\\\x[0-9a-f][0-9a-f]',){16})" "\\1\n  " bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp"
"// Generated from src/backends/opencl/kernels/*.cl by embed_kernels.cmake; do not edit.
#include \"backends/opencl/kernel_source.h\"

namespace anymoe::opencl {
namespace {
constexpr char kBytes[] = {
  ${bytes}'\\0'};
}  // namespace

std::string_view OpenClKernelSource() { return std::string_view(kBytes, ${size}); }

}  // namespace anymoe::opencl
")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
