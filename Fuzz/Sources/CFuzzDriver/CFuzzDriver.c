// The driver is declared in include/CFuzzDriver.h and defined by libFuzzer's runtime; SwiftPM needs one source.
#include "CFuzzDriver.h"
