# Source rules for code that handles untrusted input (reliability.md §1.1, E4),
# run by ctest as Lint.UntrustedInputRules:
#  - no std::regex anywhere in src/: libstdc++'s backtracking engine recurses
#    once per character and overflows the stack on long runs (llama.cpp #21257);
#  - nothing in src/server/ opens files: request fields never name a path, the
#    model comes only from the command line.
# Usage: cmake -DSRC=<repo>/src -P untrusted_input_rules.cmake
file(GLOB_RECURSE sources "${SRC}/*.cc" "${SRC}/*.h")
set(problems "")
foreach(f ${sources})
  file(STRINGS "${f}" lines REGEX "std::regex|#include <regex>")
  foreach(line ${lines})
    if(NOT line MATCHES "^[ ]*//")
      string(APPEND problems "${f}: uses std::regex: ${line}\n")
    endif()
  endforeach()
endforeach()
file(GLOB server_sources "${SRC}/server/*.cc" "${SRC}/server/*.h")
foreach(f ${server_sources})
  file(STRINGS "${f}" lines REGEX "fopen|ifstream|ofstream|[^a-z_]open\\(|mmap|MappedFile|ReadJsonFile")
  foreach(line ${lines})
    if(NOT line MATCHES "^[ ]*//")
      string(APPEND problems "${f}: opens a file in the server: ${line}\n")
    endif()
  endforeach()
endforeach()
if(problems)
  message(FATAL_ERROR "${problems}")
endif()
list(LENGTH sources n)
message(STATUS "checked ${n} source files: no std::regex, no file access in src/server")
