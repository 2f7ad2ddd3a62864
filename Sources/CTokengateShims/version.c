#include "CTokengateShims_version.h"

#include <openssl/crypto.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>

int CTokengateShims_check_library_versions(char *message, unsigned long capacity) {
    unsigned long ssl = OpenSSL_version_num();
    if (ssl < 0x30000000UL) {
        snprintf(message, capacity, "tokengate needs OpenSSL 3.0 or newer at run time; loaded: %s",
                 OpenSSL_version(OPENSSL_VERSION));
        return 1;
    }
    nghttp2_info *info = nghttp2_version(0);
    if (info == NULL || info->version_num < 0x013400) {
        snprintf(message, capacity, "tokengate needs libnghttp2 1.52 or newer at run time; loaded: %s",
                 info ? info->version_str : "unknown");
        return 1;
    }
    return 0;
}
