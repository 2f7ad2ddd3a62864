//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

// Headers only (see include/CEpoll.h); a C target needs one source file.
#include "CEpoll.h"
