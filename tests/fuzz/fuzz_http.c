/*
 * fuzz_http.c - libFuzzer target: the live server's request parser (what
 * any local process, or a browser page, can send to the dashboard port)
 * and its Host check.
 */
#include <stdint.h>
#include <stdlib.h>

#include "live/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tml_http_req req;
    size_t off = 0;
    /* pipelined requests, as the server takes them: one after another */
    for (int k = 0; k < 8 && off < size; k++) {
        int n = tml__http_parse((const char *)data + off, size - off, &req);
        if (n <= 0)
            break;
        if (req.has_host)
            tml__http_host_is_loopback(req.host);
        off += (size_t)n;
    }
    return 0;
}
