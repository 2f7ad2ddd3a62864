// tokengate: system zlib, declared as a system library. Only inflate is used: Flask's and Django's signed
// session cookies may carry a zlib-compressed payload, which is read with a hard cap on its inflated size.
#ifndef C_TOKENGATE_ZLIB_SHIM_H
#define C_TOKENGATE_ZLIB_SHIM_H

#include <zlib.h>

#endif
