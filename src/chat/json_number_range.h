// Integer and number texts under `minimum`, `maximum`, `exclusiveMinimum`,
// `exclusiveMaximum` and (whole) `multipleOf`, as byte DFAs over the digits:
// each bound becomes a digit-by-digit comparison (a regular expression of
// at most a few alternatives per digit, never a list of values), the two
// sides are intersected, and so is the canonical grammar of what is
// generated: `-?(0|[1-9][0-9]*)` for integers (at most 15 digits), plus an
// optional fraction `\.[0-9]+` for numbers, at most 15 digits in all and no
// exponent, so that a decimal comparison on the text is the comparison
// Python's float makes on the parsed value.
#pragma once

#include <optional>
#include <string>

#include "chat/byte_dfa.h"
#include "core/status.h"

namespace anymoe {

struct NumberBounds {
  // Bounds as decimal texts ("-12", "0.25"); empty: none.
  std::string minimum, maximum;
  bool exclusive_minimum = false, exclusive_maximum = false;
  int64_t multiple_of = 0;  // 0: none; only for integers
};

// A bound of a schema as a plain decimal text (no exponent): "-273.15".
std::string DecimalText(double value);

// Errors name the limit, e.g. "no integer of at most 15 digits is >= 1e+20".
Expected<ByteDfa> IntegerRangeDfa(const NumberBounds& bounds, size_t max_states);
Expected<ByteDfa> NumberRangeDfa(const NumberBounds& bounds, size_t max_states);

}  // namespace anymoe
