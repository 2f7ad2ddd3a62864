// tokengate: system libnghttp2, declared as a system library.
#ifndef C_TOKENGATE_NGHTTP2_SHIM_H
#define C_TOKENGATE_NGHTTP2_SHIM_H

#include <nghttp2/nghttp2.h>
#if !defined(NGHTTP2_VERSION_NUM) || NGHTTP2_VERSION_NUM < 0x013400
#error "tokengate needs libnghttp2 1.52 or newer (apt-get install libnghttp2-dev on Debian 12); the headers found are older."
#endif

#endif
