#include "CTokengateShims_version.h"

#include <openssl/crypto.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>

int CTokengateShims_library_version_problem(unsigned long openssl_number, const char *openssl_text,
                                            int nghttp2_number, const char *nghttp2_text,
                                            char *message, unsigned long capacity) {
    if (openssl_number < 0x30000000UL) {
        snprintf(message, capacity,
                 "the loaded OpenSSL library is %s; tokengate needs OpenSSL 3.0 or newer at run time "
                 "(Debian 12: apt-get install libssl3)",
                 openssl_text ? openssl_text : "of an unknown version");
        return 1;
    }
    if (nghttp2_number < 0x013400) {
        snprintf(message, capacity,
                 "the loaded libnghttp2 is version %s; tokengate needs libnghttp2 1.52 or newer at run time "
                 "(Debian 12: apt-get install libnghttp2-14)",
                 nghttp2_text ? nghttp2_text : "unknown");
        return 1;
    }
    return 0;
}

int CTokengateShims_check_library_versions(char *message, unsigned long capacity) {
    nghttp2_info *info = nghttp2_version(0);
    return CTokengateShims_library_version_problem(
        OpenSSL_version_num(), OpenSSL_version(OPENSSL_VERSION),
        info ? info->version_num : 0, info ? info->version_str : NULL,
        message, capacity);
}
