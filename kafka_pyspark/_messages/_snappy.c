/* Our snappy decoder: the payloads of snappy wrappers of Kafka 0.7 message sets decompressed
 * (the snappy lane, _wrappers.c, walks what they hold). Uses nothing of the module's other
 * files.
 *
 * A snappy wrapper's payload (kafka_pyspark/_messages/compression.py has the formats) is
 * snappy-java's stream framing,
 *
 *   82 53 4e 41 50 50 59 00 | int32 version | int32 min compatible version (1)
 *   then per block: int32 compressed length | raw snappy block
 *
 * (the header may repeat between blocks), or, without the header, one raw snappy block. A raw
 * block is a varint (the uncompressed size), then elements, each a tag byte:
 *
 *   tag & 3 == 0  literal: (tag >> 2) + 1 bytes follow; 60..63 say the length - 1 is in the
 *                 next 1..4 bytes, little-endian
 *   tag & 3 == 1  copy: 4 + ((tag >> 2) & 7) bytes from offset ((tag >> 5) << 8) | next byte
 *   tag & 3 == 2  copy: (tag >> 2) + 1 bytes from the offset in the next 2 bytes (LE)
 *   tag & 3 == 3  copy: (tag >> 2) + 1 bytes from the offset in the next 4 bytes (LE)
 *
 * where a copy repeats output from `offset` bytes back (it may overlap itself). This decoder is
 * our own, written from that description. It trusts nothing: every literal and copy is checked
 * against the input left, the output written so far and the size the block announced; a block
 * must end exactly at that size. It accepts nothing the Python path (cramjam) refuses: on any
 * doubt it returns ST_BAD_SNAPPY and the caller decodes the set on the general path, which
 * raises the exact error.
 */
#include "_kernel.h"

static const uint8_t JAVA_MAGIC[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
#define JAVA_HEADER_SIZE 16
#define MAX_VARINT 5

/* The uncompressed size a raw block announces (its varint); -1 if unreadable. */
static int64_t block_size(const uint8_t *p, Py_ssize_t n, Py_ssize_t *used)
{
    uint64_t v = 0;
    for (Py_ssize_t i = 0; i < n && i < MAX_VARINT; i++) {
        v |= (uint64_t)(p[i] & 0x7F) << (7 * i);
        if (p[i] < 0x80) {
            *used = i + 1;
            return v <= UINT32_MAX ? (int64_t)v : -1;
        }
    }
    return -1;
}

#if defined(__GNUC__)
#define LIKELY(x) __builtin_expect(!!(x), 1)
#else
#define LIKELY(x) (x)
#endif
#define FAST_IN 33  /* a tag and a 32-byte literal (or a tag and its 4 offset bytes) */
#define FAST_OUT 64 /* the longest copy: short_copy's steps stay within it */
#define FAST_DONE 16 /* output written before the fast loop may run (see fast_elements) */

/* Per tag, what the fast loop needs without a branch on the kind of element:
 *   bits 0-7    its length in the output (a literal's when (tag >> 2) < 60)
 *   bits 16-27  the part of the offset the tag gives: its high bits (1-byte-offset copy), or 16
 *               for a literal (so a literal passes the offset checks, see fast_elements)
 *   bit 30      E_SLOW: longer than 32 bytes (or a literal whose length follows the tag)
 *   bit 31      E_LITERAL
 *   bits 32-63  the mask of the offset bytes after the tag (0 for a literal)
 * and apart, in bytes, the input it takes: the tag and its offset bytes (copy) or its bytes
 * (literal). The walk from tag to tag is what bounds the loop's speed (each tag's position
 * depends on the one before): a byte table (load, add) keeps that chain short. */
#define E_SLOW (1u << 30)
#define E_LITERAL (1u << 31)
static uint64_t tag_table[256];
static uint8_t tag_input[256];
static const uint32_t trailer_mask[5] = {0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF};

void kp_snappy_init(void)
{
    for (uint32_t tag = 0; tag < 256; tag++) {
        uint32_t kind = tag & 3, len, extra = 0, base = 16, flags = E_LITERAL;
        if (kind == 0) {
            len = (tag >> 2) + 1;
        } else {
            extra = kind == 3 ? 4 : kind;
            len = kind == 1 ? 4 + ((tag >> 2) & 7) : (tag >> 2) + 1;
            base = kind == 1 ? (tag >> 5) << 8 : 0;
            flags = 0;
        }
        uint32_t take = 1 + (kind == 0 ? len : extra);
        flags |= len > 32 ? E_SLOW : 0;
        tag_table[tag] = len | (base << 16) | flags | ((uint64_t)trailer_mask[extra] << 32);
        tag_input[tag] = (uint8_t)take;
    }
}

/* A copy of len <= 64 bytes from off bytes back (it may overlap itself: the bytes repeat with
 * period off), with FAST_OUT bytes of room at op. */
static inline void short_copy(uint8_t *op, size_t off, size_t len)
{
    const uint8_t *from = op - off;
    if (off >= 16) {
        for (size_t i = 0; i < len; i += 16)
            memcpy(op + i, from + i, 16);
    } else if (off >= 8) {
        for (size_t i = 0; i < len; i += 8)
            memcpy(op + i, from + i, 8);
    } else {
        /* the first 8 bytes one at a time, then 8 at a time from the multiple of off that is
         * 8 to 14 bytes back (the same bytes, the pattern repeating) */
        for (size_t i = 0; i < 8; i++)
            op[i] = from[i];
        size_t step = off * ((8 + off - 1) / off);
        for (size_t i = 8; i < len; i += 8)
            memcpy(op + i, op + i - step, 8);
    }
}

/* A literal of the fast loop whose length needs more than its tag says: 0, or -1 when it does
 * not fit what is left of the input or the output (raw_block's careful loop then decides). */
static inline int long_literal(uint8_t tag, const uint8_t **ipp, const uint8_t *in_end,
                               uint8_t **opp, const uint8_t *op_end)
{
    const uint8_t *at = *ipp + 1;
    size_t len = tag >> 2;
    if (len >= 60) { /* 1..4 length bytes follow: within FAST_IN of the input */
        len = le32(at) & trailer_mask[len - 59];
        at += (tag >> 2) - 59;
    }
    len += 1;
    if ((size_t)(in_end - at) < len || (size_t)(op_end - *opp) < len)
        return -1;
    memcpy(*opp, at, len);
    *ipp = at + len;
    *opp += len;
    return 0;
}

enum { EL_NEXT, EL_RECHECK, EL_CAREFUL, EL_BAD };

/* One element at ip, at least FAST_IN bytes from the end of the input and FAST_OUT from the
 * end of the output, FAST_DONE bytes into the output. One of up to 32 bytes with nothing
 * doubtful (a literal, or a copy from 16 or more bytes back and not before the start) is two
 * 16-byte moves from where it comes from, chosen without a branch, whatever its length (the
 * bytes past it are rewritten by the next elements, never past the announced size); others
 * take short_copy or long_literal. EL_NEXT, or EL_RECHECK after a long literal (the bounds
 * moved), EL_CAREFUL for a literal that does not fit (raw_block's careful loop decides),
 * EL_BAD for a copy from offset 0 or before the start. */
static inline int fast_element(const uint8_t **ipp, const uint8_t *in_end, uint8_t **opp,
                               const uint8_t *dst, const uint8_t *op_end)
{
    const uint8_t *ip = *ipp;
    uint8_t *op = *opp;
    uint8_t tag = *ip;
    uint64_t entry = tag_table[tag];
    uint32_t e = (uint32_t)entry;
    size_t len = e & 0xFF;
    size_t off = ((e >> 16) & 0xFFF) + (le32(ip + 1) & (uint32_t)(entry >> 32));
    size_t done = (size_t)(op - dst); /* >= FAST_DONE: done - 16 does not wrap */
    if (!LIKELY(!(e & E_SLOW) && off - 16 <= done - 16)) { /* 16 <= off <= done */
        if (e & E_LITERAL)
            return long_literal(tag, ipp, in_end, opp, op_end) < 0 ? EL_CAREFUL : EL_RECHECK;
        if (off - 1 >= done) /* offset 0, or before the start */
            return EL_BAD;
        short_copy(op, off, len);
    } else {
        const uint8_t *from = (e & E_LITERAL) ? ip + 1 : op - off;
        memcpy(op, from, 16); /* in two steps: from may be op - 16 */
        memcpy(op + 16, from + 16, 16);
    }
    *opp = op + len;
    *ipp = ip + tag_input[tag];
    return EL_NEXT;
}

/* The elements of a block while far from both ends (see fast_element): two per bounds check
 * while two fit, then one. Stops near an end or at a literal that does not fit, for
 * raw_block's careful loop. 0, or -1: a copy from offset 0 or before the start. */
static int fast_elements(const uint8_t **ipp, const uint8_t *in_end, uint8_t **opp,
                         const uint8_t *dst, const uint8_t *op_end)
{
    const uint8_t *ip = *ipp;
    uint8_t *op = *opp;
    int r = EL_NEXT;
    if (in_end - ip < FAST_IN || op_end - op < FAST_OUT || op - dst < FAST_DONE)
        return 0;
    const uint8_t *ip_last = in_end - FAST_IN, *ip_last2 = ip_last - FAST_IN;
    const uint8_t *op_last = op_end - FAST_OUT, *op_last2 = op_last - FAST_OUT;
    while (ip <= ip_last2 && op <= op_last2) {
        r = fast_element(&ip, in_end, &op, dst, op_end);
        if (r == EL_NEXT)
            r = fast_element(&ip, in_end, &op, dst, op_end);
        if (r >= EL_CAREFUL)
            break;
    }
    while (r < EL_CAREFUL && ip <= ip_last && op <= op_last)
        r = fast_element(&ip, in_end, &op, dst, op_end);
    *ipp = ip;
    *opp = op;
    return r == EL_BAD ? -1 : 0;
}

/* One literal (its tag read) near an end of the block, or a long one: 0, or -1. */
static int careful_literal(uint8_t tag, const uint8_t **ipp, const uint8_t *in_end,
                           uint8_t **opp, const uint8_t *op_end)
{
    const uint8_t *ip = *ipp;
    uint8_t *op = *opp;
    size_t len = tag >> 2;
    if (len >= 60) {
        size_t bytes = len - 59;
        if ((size_t)(in_end - ip) < bytes)
            return -1;
        len = 0;
        for (size_t i = 0; i < bytes; i++)
            len |= (size_t)ip[i] << (8 * i);
        ip += bytes;
    }
    len += 1;
    if ((size_t)(in_end - ip) < len || (size_t)(op_end - op) < len)
        return -1;
    memcpy(op, ip, len);
    *ipp = ip + len;
    *opp = op + len;
    return 0;
}

/* One copy (its tag read) near an end of the block: 0, or -1. */
static int careful_copy(uint8_t tag, const uint8_t **ipp, const uint8_t *in_end, uint8_t **opp,
                        const uint8_t *dst, const uint8_t *op_end)
{
    const uint8_t *ip = *ipp;
    uint8_t *op = *opp;
    size_t len, off;
    if ((tag & 3) == 1) {
        if (ip >= in_end)
            return -1;
        len = 4 + ((tag >> 2) & 7);
        off = ((size_t)(tag >> 5) << 8) | *ip++;
    } else if ((tag & 3) == 2) {
        if (in_end - ip < 2)
            return -1;
        len = (size_t)(tag >> 2) + 1;
        off = (size_t)ip[0] | ((size_t)ip[1] << 8);
        ip += 2;
    } else {
        if (in_end - ip < 4)
            return -1;
        len = (size_t)(tag >> 2) + 1;
        off = le32(ip);
        ip += 4;
    }
    if (off == 0 || off > (size_t)(op - dst) || len > (size_t)(op_end - op))
        return -1;
    const uint8_t *from = op - off;
    for (size_t i = 0; i < len; i++) /* byte by byte: it may overlap itself */
        op[i] = from[i];
    *ipp = ip;
    *opp = op + len;
    return 0;
}

/* Decompresses the raw block ip[0:n] into dst[0:cap]: the bytes written, or -1. */
static Py_ssize_t raw_block(const uint8_t *ip, Py_ssize_t n, uint8_t *dst, Py_ssize_t cap)
{
    Py_ssize_t used;
    int64_t size = block_size(ip, n, &used);
    if (size < 0 || size > cap)
        return -1;
    const uint8_t *in_end = ip + n;
    uint8_t *op = dst, *op_end = dst + size;
    ip += used;
    while (ip < in_end) {
        if (fast_elements(&ip, in_end, &op, dst, op_end) < 0)
            return -1;
        if (ip == in_end)
            break;
        uint8_t tag = *ip++; /* one element near an end, or a long literal, carefully */
        int r = (tag & 3) == 0 ? careful_literal(tag, &ip, in_end, &op, op_end)
                               : careful_copy(tag, &ip, in_end, &op, dst, op_end);
        if (r < 0)
            return -1;
    }
    return op == op_end ? (Py_ssize_t)size : -1;
}

/* The blocks of a wrapper payload, one at a time, in snappy-java's framing (or the whole
 * payload as one raw block). */
typedef struct {
    const uint8_t *p;
    Py_ssize_t n, pos;
    int raw;
} frames_t;

/* 0: a framing the Python path reads (raw or snappy-java); -1: one it refuses. */
static int frames_open(frames_t *f, const uint8_t *p, Py_ssize_t n)
{
    f->p = p;
    f->n = n;
    f->pos = 0;
    f->raw = !(n >= 8 && memcmp(p, JAVA_MAGIC, 8) == 0);
    if (f->raw && n >= 1 && p[0] == 0xFF)
        return -1; /* perhaps the snappy framing format: the Python path says which */
    return 0;
}

/* 1: the next block in (*block, *len); 0: no more; -1: a framing error. */
static int frames_next(frames_t *f, const uint8_t **block, Py_ssize_t *len)
{
    if (f->raw) {
        if (f->pos)
            return 0;
        f->pos = f->n;
        *block = f->p;
        *len = f->n;
        return 1;
    }
    const uint8_t *p = f->p;
    while (f->pos < f->n) {
        Py_ssize_t left = f->n - f->pos;
        if (left >= 8 && memcmp(p + f->pos, JAVA_MAGIC, 8) == 0) {
            if (left < JAVA_HEADER_SIZE || (int32_t)be32(p + f->pos + 12) > 1)
                return -1;
            f->pos += JAVA_HEADER_SIZE;
            continue;
        }
        if (left < 4)
            return -1;
        int32_t length = (int32_t)be32(p + f->pos);
        if (length <= 0 || length > left - 4)
            return -1;
        *block = p + f->pos + 4;
        *len = length;
        f->pos += 4 + (Py_ssize_t)length;
        return 1;
    }
    return 0;
}

/* The bytes a wrapper payload decompresses to (the sum its blocks announce); -1: a payload the
 * Python path must look at. */
int64_t kp_snappy_payload_size(const uint8_t *p, Py_ssize_t n)
{
    frames_t f;
    const uint8_t *block;
    Py_ssize_t len, used;
    int64_t total = 0;
    int more;
    if (frames_open(&f, p, n) < 0)
        return -1;
    while ((more = frames_next(&f, &block, &len)) > 0) {
        int64_t size = block_size(block, len, &used);
        if (size < 0)
            return -1;
        total += size;
    }
    return more < 0 ? -1 : total;
}

PyObject *kp_snappy_size(PyObject *self, PyObject *arg)
{
    Py_buffer buf;
    if (PyObject_GetBuffer(arg, &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    int64_t total = kp_snappy_payload_size((const uint8_t *)buf.buf, buf.len);
    PyBuffer_Release(&buf);
    return PyLong_FromLongLong(total);
}

/* Decompresses the wrapper payload p[0:n] (snappy-java's framing or one raw block) into
 * dst[0:cap]: the bytes written, or -1 (a payload this decoder does not take, or no room). */
Py_ssize_t kp_snappy_decompress(const uint8_t *p, Py_ssize_t n, uint8_t *dst, Py_ssize_t cap)
{
    frames_t f;
    const uint8_t *block;
    Py_ssize_t len, end = 0;
    int more = frames_open(&f, p, n);
    while (more == 0 && (more = frames_next(&f, &block, &len)) > 0) {
        Py_ssize_t written = raw_block(block, len, dst + end, cap - end);
        more = written < 0 ? -1 : 0;
        end += written;
    }
    return more != 0 ? -1 : end;
}

/* snappy_raw(block, out) -> bytes written; ValueError if the block is not valid snappy or
 * does not fit out (for tests and the bench: plain decompression by this decoder). */
PyObject *kp_snappy_raw(PyObject *self, PyObject *args)
{
    Py_buffer buf, out;
    if (!PyArg_ParseTuple(args, "y*w*", &buf, &out))
        return NULL;
    Py_ssize_t written = raw_block((const uint8_t *)buf.buf, buf.len, (uint8_t *)out.buf,
                                   out.len);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&out);
    if (written < 0) {
        PyErr_SetString(PyExc_ValueError, "snappy_raw: not a valid raw snappy block");
        return NULL;
    }
    return PyLong_FromSsize_t(written);
}
