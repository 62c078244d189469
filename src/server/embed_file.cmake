# Writes a C++ source that defines `std::string_view NAME()` returning the bytes
# of INPUT. Run as: cmake -DINPUT=... -DOUTPUT=... -DNAME=... -DHEADER=... -P embed_file.cmake
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_len)
math(EXPR size "${hex_len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
# Break the initializer into lines of 16 bytes so the file stays readable.
string(REGEX REPLACE "(('\\\\x[0-9a-f][0-9a-f]',){16})" "\\1\n  " bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp"
"// Generated from ${INPUT} by embed_file.cmake; do not edit.
#include \"${HEADER}\"

namespace anymoe {
namespace {
constexpr char kBytes[] = {
  ${bytes}'\\0'};
}  // namespace

std::string_view ${NAME}() { return std::string_view(kBytes, ${size}); }

}  // namespace anymoe
")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
