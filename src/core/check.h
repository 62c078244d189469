// Always-on invariant checks for the hot path: a broken invariant is a bug in
// anymoe, never bad user input (that returns a Status), so it aborts with file:line.
#pragma once

#include <cstdio>
#include <cstdlib>

#define CHECK(cond)                                                                 \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "anymoe: check failed at %s:%d: %s\n", __FILE__, __LINE__, \
                   #cond);                                                          \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)
