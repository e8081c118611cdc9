/* Base64 for the REST API's binary strings: {"b64": "..."} in requests (decoded into DT_STRING
 * elements) and in responses (outputs whose alias ends in "_bytes"). Standard alphabet. Decoding
 * is as lenient as absl::Base64Unescape, which TF Serving uses: padding may be omitted and ASCII
 * whitespace is skipped; anything else outside the alphabet is an error.
 */
#include <string.h>

#include "server/server-impl.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void tfs__base64_encode(tfs__buf *b, const void *data, size_t n)
{
    const unsigned char *p = data;
    char                 q[4];
    size_t               i = 0;
    for (; i + 3 <= n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8 | p[i + 2];
        q[0] = alphabet[v >> 18];
        q[1] = alphabet[(v >> 12) & 63];
        q[2] = alphabet[(v >> 6) & 63];
        q[3] = alphabet[v & 63];
        tfs__buf_append(b, q, 4);
    }
    if (i < n) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0);
        q[0] = alphabet[v >> 18];
        q[1] = alphabet[(v >> 12) & 63];
        q[2] = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
        q[3] = '=';
        tfs__buf_append(b, q, 4);
    }
}

size_t tfs__base64_decoded_max(size_t n)
{
    return n / 4 * 3 + 3;
}

static int sextet(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

static bool is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool tfs__base64_decode(const char *in, size_t n, char *out, size_t *out_len)
{
    unsigned acc = 0;
    int      have = 0;      /* sextets in the current quantum */
    int      pad = 0;       /* '=' seen */
    size_t   o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)in[i];
        if (is_space(c))
            continue;
        if (c == '=') {
            /* Padding only completes a quantum of 2 or 3 sextets. */
            if (have < 2 || have + pad >= 4)
                return false;
            pad++;
            continue;
        }
        int s = sextet(c);
        if (s < 0 || pad)
            return false;
        acc = acc << 6 | (unsigned)s;
        if (++have == 4) {
            out[o++] = (char)(acc >> 16);
            out[o++] = (char)(acc >> 8);
            out[o++] = (char)acc;
            acc = 0;
            have = 0;
        }
    }
    if (pad && have + pad != 4)
        return false;
    if (have == 1)
        return false;
    if (have == 2) {
        out[o++] = (char)(acc >> 4);
    } else if (have == 3) {
        out[o++] = (char)(acc >> 10);
        out[o++] = (char)(acc >> 2);
    }
    *out_len = o;
    return true;
}
