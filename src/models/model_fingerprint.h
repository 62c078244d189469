// A short identity of a model file, so that data measured on one model (an
// expert profile) is not applied to another: a 64-bit FNV-1a hash of the GGUF
// header (metadata and tensor table) and of every tensor's name, dtype, shape
// and first bytes. Two files that differ only deep inside a tensor hash alike;
// files with other metadata, shapes or weights (a random-weight copy of the
// same layout included) do not. Not a security check.
#pragma once

#include <string>

#include "models/model_file.h"

namespace anymoe {

// 16 lowercase hex digits. Reads the header and one page per tensor.
std::string ModelFingerprint(const ModelFile& file);

}  // namespace anymoe
