// libFuzzer's driver, exported by its runtime (linked by -sanitize=fuzzer). SwiftPM gives every executable a
// `main` of its own (the module's entry point), which shadows libFuzzer's; each fuzz target's entry point
// therefore hands its arguments and its one-input function to this driver, as libFuzzer's own `main` would.
#ifndef CFUZZDRIVER_H
#define CFUZZDRIVER_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
