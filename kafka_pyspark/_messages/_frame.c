/* Payloads framed as 0.7 messages, their CRC-32s by four fold lanes or per payload (_frame.h).
 *
 * The lanes' arithmetic (zlib's reflected CRC-32, P = x^32 + x^26 + ... + 1; a 16-byte block
 * loaded little-endian is the polynomial whose x^127 coefficient is bit 0 of its first byte):
 *   - L(M), the register after feeding M from register 0, is M(x) * x^32 mod P; leading zero
 *     bytes do not change it, so a payload of n bytes is read as 0^z | M with z = -n mod 16, and
 *     crc32(M) = L(M) ^ crc32(n zero bytes) (_zeros.c's table);
 *   - folding: the state X (128 bits, congruent to the payload so far mod P) takes the next
 *     block B as X' = H * (x^192 mod P) + Lo * (x^128 mod P) + B, H and Lo X's 64-bit halves.
 *     A carry-less product of two 64-bit reflected values is their product times x in the
 *     block layout, so the constants are x^191 mod P and x^127 mod P, reflected in 64 bits;
 *   - the end: Y = H * (x^96 mod P) + Lo * x^32 (degree <= 95), Z = Y's top 32 coefficients
 *     times (x^64 mod P) plus its low 64 (degree <= 63), then Barrett's reduction of Z with
 *     mu = floor(x^64 / P): q = floor(floor(Z / x^32) * mu / x^32), L = (Z + q * P) mod x^32.
 * tests/messages/test_frame_lanes.py derives every constant below from P with Python integers
 * and checks the lanes against zlib on payloads of every length around the edges.
 */
#include "_frame.h"

#include <libdeflate.h>

static uint32_t deflate_crc(uint32_t init, const unsigned char *buf, uint64_t len)
{
    return (uint32_t)libdeflate_crc32(init, buf, (size_t)len);
}
static kp_crc32_fn message_crc = deflate_crc;

void kp_frame_set_crc(kp_crc32_fn fn) { message_crc = fn; }

/* row i at dst, its CRC by the per-payload function; its size */
static inline size_t frame_row(const kp_rows_t *r, Py_ssize_t i, uint8_t *dst)
{
    const uint8_t *payload = r->data + r->offs[i];
    size_t size = (size_t)(r->offs[i + 1] - r->offs[i]);
    uint32_t crc = size ? message_crc(0, payload, size) : 0;
    if (r->crcs)
        r->crcs[i - r->crc_base] = crc;
    size_t head = kp_header(dst, r->magic, CODEC_NONE, size, crc);
    if (size)
        memcpy(dst + head, payload, size);
    return head + size;
}

static size_t frame_rows(const kp_rows_t *r, Py_ssize_t lo, Py_ssize_t hi, uint8_t *dst)
{
    uint8_t *op = dst;
    for (Py_ssize_t i = lo; i < hi; i++)
        op += frame_row(r, i, op);
    return (size_t)(op - dst);
}

/* whether the CPU has the lanes (kp_frame_init); whether they are used (kp_frame_lanes) */
static int have_lanes, lanes_on;

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_LANES 1
#include <immintrin.h>

#define LANES __attribute__((target("pclmul,ssse3,avx512f,avx512vl,vpclmulqdq")))
#define N_LANES 4

#define FOLD_HI 0x65673b4600000000ULL  /* x^191 mod P, reflected in 64 bits */
#define FOLD_LO 0x9ba54c6f00000000ULL  /* x^127 mod P */
#define END_96 0xccaa009e00000000ULL   /* x^95 mod P */
#define END_64 0xb8bc676500000000ULL   /* x^63 mod P */
#define BARRETT_MU 0x1f7011641ULL      /* floor(x^64 / P), reflected in 33 bits */
#define BARRETT_P 0x1db710641ULL       /* P, reflected in 33 bits */

/* a folded payload's size indexes the zero-CRC table directly */
typedef char lanes_within_zero_table[KP_LANE_MAX < KP_ZERO_TABLE ? 1 : -1];

/* pshufb masks: SHIFT + r moves a block's first r bytes to its end, zeros before them */
static const uint8_t SHIFT[32] = {
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

/* L of the payload folded into x */
LANES static inline uint32_t reduce(__m128i x)
{
    const __m128i ends = _mm_set_epi64x((long long)END_64, (long long)END_96);
    const __m128i barrett = _mm_set_epi64x((long long)BARRETT_P, (long long)BARRETT_MU);
    const __m128i low32 = _mm_set_epi64x(0, 0xFFFFFFFFLL), high64 = _mm_set_epi64x(-1, 0);
    __m128i y = _mm_xor_si128(_mm_clmulepi64_si128(x, ends, 0x00),
                              _mm_slli_si128(_mm_srli_si128(x, 8), 4));
    __m128i z = _mm_xor_si128(_mm_clmulepi64_si128(y, ends, 0x10), _mm_and_si128(y, high64));
    z = _mm_srli_si128(z, 8);
    __m128i q = _mm_and_si128(_mm_clmulepi64_si128(_mm_and_si128(z, low32), barrett, 0x00), low32);
    __m128i u = _mm_clmulepi64_si128(q, barrett, 0x10);
    return (uint32_t)_mm_cvtsi128_si32(_mm_srli_si128(_mm_xor_si128(z, u), 4));
}

typedef struct {
    const uint8_t *src, *stop; /* the next block to fold; the payload's end */
    uint8_t *dst;              /* where that block is copied */
    uint8_t *head, *out;       /* the row's header; where the next row goes */
    Py_ssize_t row, end;       /* the row being folded; the lane's end */
} lane_t;

/* the lane's row done: its CRC into the header (and crcs) */
LANES static inline void finish(const kp_rows_t *r, lane_t *l, __m128i x)
{
    size_t size = (size_t)(r->offs[l->row + 1] - r->offs[l->row]);
    uint32_t crc = reduce(x) ^ kp_zero_table[size];
    if (r->crcs)
        r->crcs[l->row - r->crc_base] = crc;
    kp_header(l->head, r->magic, CODEC_NONE, size, crc);
    l->row++;
}

/* a row of `size` bytes at src: its first `first` bytes (its partial block, 1-16 bytes),
 * copied to dst and shifted to the block's end */
LANES static inline __m128i first_block(const kp_rows_t *r, const uint8_t *src, size_t size,
                                        size_t first, uint8_t *dst)
{
    __m128i v;
    if (size >= 16) {
        v = _mm_loadu_si128((const __m128i *)src);
        _mm_storeu_si128((__m128i *)dst, v); /* within the payload: later blocks agree */
    } else {
        uint8_t pad[16] = {0};
        if (src + 16 <= r->data + r->data_len)
            v = _mm_loadu_si128((const __m128i *)src); /* bytes past the row are shifted out */
        else
            v = _mm_loadu_si128((const __m128i *)memcpy(pad, src, size));
        memcpy(dst, src, size);
    }
    return _mm_shuffle_epi8(v, _mm_loadu_si128((const __m128i *)(SHIFT + first)));
}

/* the lane's next row with blocks left to fold, started (its first block in *x); rows on the
 * way framed: empty ones and those over KP_LANE_MAX per payload, those of one block at once.
 * 0: no row left. */
LANES static inline int start(const kp_rows_t *r, lane_t *l, __m128i *x)
{
    for (; l->row < l->end;) {
        const uint8_t *src = r->data + r->offs[l->row];
        size_t size = (size_t)(r->offs[l->row + 1] - r->offs[l->row]);
        if (!size || size > KP_LANE_MAX) {
            l->out += frame_row(r, l->row++, l->out);
            continue;
        }
        l->head = l->out;
        uint8_t *dst = l->out + kp_head_size(r->magic);
        l->out = dst + size;
        size_t first = ((size - 1) & 15) + 1;
        *x = first_block(r, src, size, first, dst);
        if (first == size) {
            finish(r, l, *x);
            continue;
        }
        l->src = src + first;
        l->stop = src + size;
        l->dst = dst + first;
        return 1;
    }
    return 0;
}

/* the lane's rows to the end, one fold chain (the lanes' tail) */
LANES static void drain(const kp_rows_t *r, lane_t *l, __m128i x)
{
    const __m128i k = _mm_set_epi64x((long long)FOLD_LO, (long long)FOLD_HI);
    do {
        for (; l->src < l->stop; l->src += 16, l->dst += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)l->src);
            _mm_storeu_si128((__m128i *)l->dst, v);
            x = _mm_ternarylogic_epi64(_mm_clmulepi64_si128(x, k, 0x00),
                                       _mm_clmulepi64_si128(x, k, 0x11), v, 0x96);
        }
        finish(r, l, x);
    } while (start(r, l, &x));
}

/* the first row of lane `i` of N_LANES: where the payload bytes reach i / N_LANES of all */
static Py_ssize_t lane_start(const kp_rows_t *r, Py_ssize_t lo, Py_ssize_t hi, int i)
{
    int64_t at = r->offs[lo] + (r->offs[hi] - r->offs[lo]) * i / N_LANES;
    while (lo < hi) { /* the first row whose payload starts at or after `at` */
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (r->offs[mid] < at)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* lane `i`'s rows (its share of lo..hi) and where they go in dst */
static lane_t lane_of(const kp_rows_t *r, Py_ssize_t lo, Py_ssize_t hi, int i, uint8_t *dst)
{
    lane_t l = {0};
    l.row = lane_start(r, lo, hi, i);
    l.end = i + 1 < N_LANES ? lane_start(r, lo, hi, i + 1) : hi;
    size_t before = (size_t)(r->offs[l.row] - r->offs[lo]), rows = (size_t)(l.row - lo);
    l.out = dst + before + rows * kp_head_size(r->magic);
    return l;
}

/* The four lanes' fold states are the four 128-bit parts of one 512-bit register, folded by one
 * pair of carry-less multiplies per step; a lane whose row ends hands its part over to finish
 * (and takes its next row's first block in) between steps. When one lane runs out of rows, the
 * others finish theirs one by one. Each lane's pointers of the step are copied into locals
 * named per lane, so that they stay in registers (not written back at every step); a block
 * goes to its source address plus the row's distance to its copy (`to`), so only the source
 * pointers move. */
#define LANE_GO(i)                                                                              \
    lane_t l##i = lane_of(r, lo, hi, i, dst);                                                  \
    __m128i x##i = _mm_setzero_si128();                                                        \
    int busy##i = start(r, &l##i, &x##i);                                                      \
    const uint8_t *src##i = l##i.src, *stop##i = l##i.stop;                                    \
    ptrdiff_t to##i = l##i.dst - l##i.src
#define LANE_LOAD(i)                                                                           \
    __m128i v##i = _mm_loadu_si128((const __m128i *)src##i);                                   \
    _mm_storeu_si128((__m128i *)((uint8_t *)src##i + to##i), v##i);                           \
    src##i += 16
#define LANE_TURN(i)                                                                           \
    if (src##i == stop##i) {                                                                   \
        x##i = _mm512_extracti32x4_epi32(x, i);                                                \
        finish(r, &l##i, x##i);                                                                \
        if (!(busy##i = start(r, &l##i, &x##i)))                                               \
            break;                                                                             \
        x = _mm512_inserti32x4(x, x##i, i);                                                    \
        src##i = l##i.src;                                                                     \
        stop##i = l##i.stop;                                                                   \
        to##i = l##i.dst - l##i.src;                                                           \
    }
#define LANE_LEAVE(i)                                                                          \
    x##i = busy##i ? _mm512_extracti32x4_epi32(x, i) : x##i;                                   \
    l##i.dst = (uint8_t *)src##i + to##i;                                                      \
    l##i.src = src##i

LANES static size_t frame_lanes(const kp_rows_t *r, Py_ssize_t lo, Py_ssize_t hi, uint8_t *dst)
{
    const __m128i k1 = _mm_set_epi64x((long long)FOLD_LO, (long long)FOLD_HI);
    const __m512i k = _mm512_broadcast_i32x4(k1);
    LANE_GO(0);
    LANE_GO(1);
    LANE_GO(2);
    LANE_GO(3);
    if (busy0 && busy1 && busy2 && busy3) {
        __m512i x = _mm512_inserti32x4(
            _mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(x0), x1, 1), x2, 2),
            x3, 3);
        for (;;) {
            LANE_LOAD(0);
            LANE_LOAD(1);
            LANE_LOAD(2);
            LANE_LOAD(3);
            __m512i v = _mm512_inserti32x4(
                _mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(v0), v1, 1), v2, 2),
                v3, 3);
            x = _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00),
                                          _mm512_clmulepi64_epi128(x, k, 0x11), v, 0x96);
            LANE_TURN(0)
            LANE_TURN(1)
            LANE_TURN(2)
            LANE_TURN(3)
        }
        LANE_LEAVE(0);
        LANE_LEAVE(1);
        LANE_LEAVE(2);
        LANE_LEAVE(3);
    }
    if (busy0)
        drain(r, &l0, x0);
    if (busy1)
        drain(r, &l1, x1);
    if (busy2)
        drain(r, &l2, x2);
    if (busy3)
        drain(r, &l3, x3);
    return (size_t)(r->offs[hi] - r->offs[lo]) + (size_t)(hi - lo) * kp_head_size(r->magic);
}

void kp_frame_init(void)
{
    __builtin_cpu_init();
    have_lanes = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("ssse3") &&
                 __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                 __builtin_cpu_supports("vpclmulqdq");
    lanes_on = have_lanes;
}
#else
#define HAVE_LANES 0
void kp_frame_init(void) {}
#endif

int kp_frame_lanes(int on)
{
    if (on >= 0)
        lanes_on = on && have_lanes;
    return lanes_on;
}

size_t kp_frame(const kp_rows_t *r, Py_ssize_t lo, Py_ssize_t hi, uint8_t *dst)
{
#if HAVE_LANES
    if (lanes_on && hi - lo >= KP_LANE_MIN_ROWS)
        return frame_lanes(r, lo, hi, dst);
#endif
    return frame_rows(r, lo, hi, dst);
}
