/* The raw snappy block compressor of the encode module (_snapenc.c, used by _encode.c).
 *
 * A raw snappy block is the uncompressed length as a little-endian base-128 varint, then
 * elements: a literal (tag low bits 00: length - 1 in the tag's upper 6 bits when below 60, else
 * 60..63 naming 1..4 length bytes that follow, little-endian) followed by its bytes, or a copy
 * of earlier output (01: length 4..11 and an 11-bit offset; 10: length 1..64 and a 16-bit
 * offset). The format is the one snappy documents; this compressor is ours.
 */
#ifndef KAFKA_PYSPARK_SNAPENC_H
#define KAFKA_PYSPARK_SNAPENC_H

#include <stddef.h>
#include <stdint.h>

/* the largest input one call takes (one hash table covers it: 16-bit positions) */
#define KP_SNAPPY_MAX_INPUT 65536
/* entries of the hash table the caller passes (kp_snappy_compress clears what it uses) */
#define KP_SNAPPY_TABLE_SIZE 16384

/* bytes a block of n input bytes may take at most */
static inline size_t kp_snappy_bound(size_t n) { return 32 + n + n / 6; }

/* Compress in[0..n) (n <= KP_SNAPPY_MAX_INPUT) into out (kp_snappy_bound(n) bytes of room);
 * returns the block's size. */
size_t kp_snappy_compress(const uint8_t *in, size_t n, uint8_t *out, uint16_t *table);

#endif
