// Linked, in AddressSanitizer builds only (tests/CMakeLists.txt), into the
// test binaries whose hooks run on threads that can outlive a test body: the
// scheduler calls its hooks on its own thread, which a fixture may join only
// after the body has returned. This turns on ASan's detection of stack frames
// used after their function returned, off by default (it costs those suites
// ~15 % of their time under ASan): a between-steps hook that counted into a
// test's locals once corrupted the heap this way, and only this option showed
// it (ServerGeneration.EveryEventIsWrittenBeforeTheNextStep). ASAN_OPTIONS in
// the environment still overrides it.
extern "C" const char* __asan_default_options() { return "detect_stack_use_after_return=1"; }
