/* A raw snappy block compressor (the format: _snapenc.h), written for the encode module.
 *
 * Greedy LZ77 over a hash table of 4-byte sequences: at each position the table names the last
 * position whose 4 bytes hashed alike; when those 4 bytes are equal, the match is extended as
 * far as it goes and emitted as copies, else the search moves on, by steps that grow the longer
 * no match is found (1 byte per step for the first 32 misses, then 2, ...), so incompressible
 * input costs little. After a match, the positions just before and at its end are hashed, and a
 * match at its end is taken at once. The last MARGIN bytes are never searched (they end the
 * block as a literal), so 8-byte loads never read past the input.
 *
 * The choices (table size by input size, the hash multiplier, the step rule, the margin, how a
 * long copy is split) are those of the common snappy compressors, so a block is byte for byte
 * what the pure path's compressor (cramjam) writes: tests/messages/test_encode_kernel.py checks
 * it on varied inputs.
 */
#include "_snapenc.h"

#include <string.h>

#define MARGIN 15                   /* bytes at the end never searched */
#define MIN_SEARCHED (1 + 1 + MARGIN) /* shorter inputs are one literal */
#define HASH_MUL 0x1e35a7bdu
#define MIN_TABLE 256

/* little-endian loads: one unaligned load each where the CPU is little-endian (the compiler
 * does not always merge byte-by-byte loads into one) */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static inline uint32_t load32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint64_t load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}
#else
static inline uint32_t load32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t load64(const uint8_t *p)
{
    return (uint64_t)load32(p) | (uint64_t)load32(p + 4) << 32;
}
#endif

static inline uint32_t hash(uint32_t bytes, int shift) { return (bytes * HASH_MUL) >> shift; }

static uint8_t *literal(uint8_t *op, const uint8_t *src, size_t len)
{
    size_t n = len - 1;
    if (n < 60) {
        *op++ = (uint8_t)(n << 2);
    } else {
        uint8_t *tag = op++;
        int count = 0;
        while (n) {
            *op++ = (uint8_t)n;
            n >>= 8;
            count++;
        }
        *tag = (uint8_t)((59 + count) << 2);
    }
    memcpy(op, src, len);
    return op + len;
}

/* The literal before a match: up to 16 bytes are one 16-byte move after the tag (the bytes past
 * the literal are overwritten by what follows, or lie past the block's end within its bound;
 * the search never comes within MARGIN bytes of the input's end, so the move reads inside it) */
static inline uint8_t *literal_before_match(uint8_t *op, const uint8_t *src, size_t len)
{
    if (len > 16)
        return literal(op, src, len);
    *op++ = (uint8_t)((len - 1) << 2);
    memcpy(op, src, 16);
    return op + len;
}

static inline uint8_t *copy2(uint8_t *op, size_t offset, size_t len)
{
    op[0] = (uint8_t)(2 | (len - 1) << 2);
    op[1] = (uint8_t)offset;
    op[2] = (uint8_t)(offset >> 8);
    return op + 3;
}

static uint8_t *copy(uint8_t *op, size_t offset, size_t len)
{
    while (len >= 68) {
        op = copy2(op, offset, 64);
        len -= 64;
    }
    if (len > 64) { /* leaves 4..7: still a copy of its own */
        op = copy2(op, offset, 60);
        len -= 60;
    }
    if (len < 12 && offset < 2048) {
        op[0] = (uint8_t)(1 | (len - 4) << 2 | (offset >> 8) << 5);
        op[1] = (uint8_t)offset;
        return op + 2;
    }
    return copy2(op, offset, len);
}

/* how many bytes from a and b on are equal, b's run ending at end (a < b) */
static inline size_t match_length(const uint8_t *a, const uint8_t *b, const uint8_t *end)
{
    size_t m = 0;
    while (b + m + 8 <= end) {
        uint64_t diff = load64(a + m) ^ load64(b + m);
        if (diff)
            return m + (size_t)(__builtin_ctzll(diff) >> 3);
        m += 8;
    }
    while (b + m < end && a[m] == b[m])
        m++;
    return m;
}

size_t kp_snappy_compress(const uint8_t *in, size_t n, uint8_t *out, uint16_t *table)
{
    uint8_t *op = out;
    size_t v = n;
    while (v >= 0x80) {
        *op++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *op++ = (uint8_t)v;
    if (n < MIN_SEARCHED)
        return (size_t)((n ? literal(op, in, n) : op) - out);
    size_t size = MIN_TABLE;
    int shift = 24; /* 32 - log2(size) */
    while (size < KP_SNAPPY_TABLE_SIZE && size < n) {
        size <<= 1;
        shift--;
    }
    memset(table, 0, size * sizeof *table);
    const uint8_t *ip = in + 1, *limit = in + n - MARGIN, *end = in + n, *next_emit = in;
    uint32_t next_hash = hash(load32(ip), shift);
    for (;;) {
        uint32_t skip = 32;
        const uint8_t *next_ip = ip, *cand;
        do { /* look for a 4-byte match */
            ip = next_ip;
            uint32_t h = next_hash;
            uint32_t step = skip >> 5;
            skip += step;
            next_ip = ip + step;
            if (next_ip > limit)
                goto rest;
            next_hash = hash(load32(next_ip), shift);
            cand = in + table[h];
            table[h] = (uint16_t)(ip - in);
        } while (load32(ip) != load32(cand));
        op = literal_before_match(op, next_emit, (size_t)(ip - next_emit));
        uint64_t x;
        do { /* emit the match, and the next one while a match starts where it ends */
            const uint8_t *base = ip;
            size_t m = 4 + match_length(cand + 4, ip + 4, end);
            ip += m;
            op = copy(op, (size_t)(base - cand), m);
            next_emit = ip;
            if (ip >= limit)
                goto rest;
            x = load64(ip - 1);
            table[hash((uint32_t)x, shift)] = (uint16_t)(ip - 1 - in);
            uint32_t h = hash((uint32_t)(x >> 8), shift);
            cand = in + table[h];
            table[h] = (uint16_t)(ip - in);
        } while ((uint32_t)(x >> 8) == load32(cand));
        next_hash = hash((uint32_t)(x >> 16), shift);
        ip++;
    }
rest:
    if (next_emit < end)
        op = literal(op, next_emit, (size_t)(end - next_emit));
    return (size_t)(op - out);
}
