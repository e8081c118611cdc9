/* crc32c (Castagnoli, reflected polynomial 0x82F63B78), the checksum of LevelDB table blocks and of
 * TensorBundle tensor data. Slicing-by-8: eight 256-entry tables let the loop consume 8 bytes per
 * step, several times faster than the byte-at-a-time form on restore-sized inputs (figure in
 * bench/README.md). The tables are built once, on first use, under pthread_once so concurrent
 * first calls are race-free.
 * tfs__crc32c_extend(crc, ...) continues a checksum: extend(extend(0, a), b) == crc32c(a || b).
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "savedmodel/bundle-impl.h"

#define CRC32C_POLY 0x82F63B78u

static uint32_t       crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        crc_table[0][i] = c;
    }
    /* table[k][i]: the crc of byte i followed by k zero bytes. */
    for (int k = 1; k < 8; k++)
        for (int i = 0; i < 256; i++)
            crc_table[k][i] = (crc_table[k - 1][i] >> 8) ^ crc_table[0][crc_table[k - 1][i] & 0xff];
}

static inline uint32_t load_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint32_t tfs__crc32c_extend(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&crc_once, crc_init);
    const uint8_t *p = data;
    uint32_t       c = ~crc;

    /* Loads are bytewise little-endian, so p needs no alignment and the host byte order is moot. */
    while (n >= 8) {
        uint32_t lo = load_le32(p) ^ c;
        uint32_t hi = load_le32(p + 4);
        c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
            crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^
            crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
            crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
    return ~c;
}
