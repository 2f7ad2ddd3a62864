// tokengate C shims: macro wrappers, version checks and the few helpers Swift cannot express
// without per-call allocation. Every symbol is prefixed `CTokengateShims_`.
#ifndef C_TOKENGATE_SHIMS_H
#define C_TOKENGATE_SHIMS_H

#include "CTokengateShims_version.h"
#include "CTokengateShims_crypto.h"
#include "CTokengateShims_tls.h"
#include "CTokengateShims_nghttp2.h"
#include "CTokengateShims_spawn.h"
#include "CTokengateShims_socket.h"

#endif
