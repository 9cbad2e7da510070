/* Payloads framed as 0.7 messages: the per-row work of the encode pass (_encode.c), in _frame.c.
 *
 * Row i of a column (offsets + data) becomes LENGTH | MAGIC | [ATTRIBUTES 0] | CRC32 | payload,
 * rows back to back. kp_frame writes rows lo..hi so; its CRC-32s come from one of two engines
 * with the same results (zlib's CRC-32 of each payload):
 *   - lanes, where the CPU has carry-less multiply (x86-64 PCLMULQDQ + SSSE3, checked at load):
 *     four runs of rows at once, each payload folded 16 bytes a step from register 0 while it is
 *     copied, then reduced to 32 bits, plus the CRC-32 of as many zero bytes (_zeros.c): four
 *     independent fold chains keep the multiplier busy where one payload's chain would wait on
 *     each product, and the copy rides on the fold's loads;
 *   - per payload, the CRC function kp_frame_set_crc gave (ISA-L's, else libdeflate's) and a
 *     memcpy: everywhere else, for payloads over KP_LANE_MAX bytes (one call runs at full speed
 *     on those), and for ranges of fewer rows than KP_LANE_MIN_ROWS.
 */
#ifndef KAFKA_PYSPARK_FRAME_H
#define KAFKA_PYSPARK_FRAME_H

#include "_kernel.h"

#define HEADER_V1_SIZE (LENGTH_SIZE + MIN_LENGTH_V1) /* LENGTH, MAGIC, ATTRIBUTES, CRC32 */
#define HEADER_V0_SIZE (LENGTH_SIZE + MIN_LENGTH)    /* LENGTH, MAGIC, CRC32 */

static inline void kp_put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline size_t kp_head_size(int magic) { return (size_t)header_size((uint8_t)magic); }

/* the header of a message of `size` payload bytes with CRC `crc` at p; its size */
static inline size_t kp_header(uint8_t *p, int magic, int codec, size_t size, uint32_t crc)
{
    if (magic == 1) {
        kp_put_be32(p, (uint32_t)(size + HEADER_V1_SIZE - 4));
        p[4] = 1;
        p[5] = (uint8_t)codec;
        kp_put_be32(p + 6, crc);
        return HEADER_V1_SIZE;
    }
    kp_put_be32(p, (uint32_t)(size + HEADER_V0_SIZE - 4));
    p[4] = 0;
    kp_put_be32(p + 5, crc);
    return HEADER_V0_SIZE;
}

/* the rows to frame: row i is data[offs[i]:offs[i + 1]], within data[0:data_len] */
typedef struct {
    const int64_t *offs;
    const uint8_t *data;
    size_t data_len;
    int magic;
    uint32_t *crcs;       /* crcs[i - crc_base]: row i's CRC32 is stored there, or NULL */
    Py_ssize_t crc_base;
} kp_rows_t;

#define KP_LANE_MAX 2048    /* larger payloads: one CRC call each */
#define KP_LANE_MIN_ROWS 16 /* fewer rows: per payload */

/* rows lo..hi framed back to back at dst (no GIL needed); the bytes written */
size_t kp_frame(const kp_rows_t *r, Py_ssize_t lo, Py_ssize_t hi, uint8_t *dst);
/* at the module's load: whether the CPU has the lanes (then they are on) */
void kp_frame_init(void);
/* the per-payload CRC function from now on */
void kp_frame_set_crc(kp_crc32_fn fn);
/* on: 1 lanes (where the CPU has them), 0 per payload, -1 unchanged; whether lanes are on */
int kp_frame_lanes(int on);

#endif
