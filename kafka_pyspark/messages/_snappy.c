/* snappy wrappers of Kafka 0.7 message sets, decompressed and walked in one call.
 *
 * A snappy wrapper's payload (kafka_pyspark/messages/compression.py has the formats) is
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
#include <string.h>

#include "_kernel.h"

static const uint8_t JAVA_MAGIC[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
#define JAVA_HEADER_SIZE 16
#define MAX_VARINT 5

static inline uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

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
#define FAST_IN 21  /* a tag, its 4 offset bytes and a 16-byte literal */
#define FAST_OUT 80 /* a 64-byte copy in 16-byte steps, or a 16-byte literal */

/* The elements of a block while far from both ends (FAST_IN bytes of input left, FAST_OUT of
 * output): a short literal or any copy then fits without a bounds check on its length (its
 * offset is still checked); stops before a long literal or near an end, for raw_block's
 * careful loop. 0, or -1: a copy from before the start. */
/* Per copy tag: its length (bits 0-7), the high bits of its offset (bits 8-10, a 1-byte-offset
 * copy) and the offset bytes that follow the tag (bits 11-13). */
static uint16_t copy_table[256];
static const uint32_t trailer_mask[5] = {0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF};

void kp_snappy_init(void)
{
    for (int tag = 0; tag < 256; tag++) {
        int kind = tag & 3, len = (tag >> 2) + 1, extra = kind == 3 ? 4 : kind, high = 0;
        if (kind == 1) {
            len = 4 + ((tag >> 2) & 7);
            high = (tag >> 5) << 8;
        }
        copy_table[tag] = (uint16_t)(len | high | (extra << 11));
    }
}

static int fast_elements(const uint8_t **ipp, const uint8_t *in_end, uint8_t **opp,
                         const uint8_t *dst, const uint8_t *op_end)
{
    const uint8_t *ip = *ipp;
    uint8_t *op = *opp;
    int ok = 0;
    while (in_end - ip >= FAST_IN && op_end - op >= FAST_OUT) {
        uint8_t tag = *ip;
        if ((tag & 3) == 0) {
            size_t len = (size_t)(tag >> 2) + 1;
            if (len > 16)
                break;
            memcpy(op, ip + 1, 16);
            ip += 1 + len;
            op += len;
            continue;
        }
        uint32_t entry = copy_table[tag], extra = entry >> 11;
        size_t len = entry & 0xFF;
        size_t off = (entry & 0x700) + (le32(ip + 1) & trailer_mask[extra]);
        ip += 1 + extra;
        if (!LIKELY(off - 1 < (size_t)(op - dst))) { /* off == 0 or before the start */
            ok = -1;
            break;
        }
        const uint8_t *from = op - off;
        if (LIKELY(off >= 16)) {
            memcpy(op, from, 16);
            for (size_t i = 16; i < len; i += 16)
                memcpy(op + i, from + i, 16);
        } else if (off >= 8) {
            for (size_t i = 0; i < len; i += 8)
                memcpy(op + i, from + i, 8);
        } else {
            for (size_t i = 0; i < len; i++)
                op[i] = from[i];
        }
        op += len;
    }
    *ipp = ip;
    *opp = op;
    return ok;
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

/* Decompresses the wrapper payload p[0:n] into the sink's data at dpos and walks the message
 * set found there in place (take's sink: payloads moved down to dpos, their ends and CRC
 * words). ST_END: it was whole plain messages; any other status (ST_BAD_SNAPPY for the payload
 * itself) leaves the sink partly written, for the caller to decode on the general path. */
int kp_take_snappy(const uint8_t *p, Py_ssize_t n, sink_t *s, long long *value)
{
    frames_t f;
    const uint8_t *block;
    Py_ssize_t len, end = s->dpos;
    int more = frames_open(&f, p, n);
    *value = 0;
    while (more == 0 && (more = frames_next(&f, &block, &len)) > 0) {
        Py_ssize_t written = raw_block(block, len, s->data + end, s->dcap - end);
        more = written < 0 ? -1 : 0;
        end += written;
    }
    if (more != 0)
        return ST_BAD_SNAPPY;
    Py_ssize_t pos = s->dpos;
    int status = kp_take(s->data, &pos, end, end, s, value);
    return status == ST_END && pos != end ? ST_SHORT : status; /* pos != end: unreachable */
}

/* snappy_take(payload, data, dpos, offsets, words, k) -> (status, value, dpos, k, m):
 * take_snappy of one wrapper payload. */
PyObject *kp_snappy_take(PyObject *self, PyObject *args)
{
    Py_buffer buf, data, offs, wbuf;
    Py_ssize_t dpos, k;
    if (!PyArg_ParseTuple(args, "y*w*nw*w*n", &buf, &data, &dpos, &offs, &wbuf, &k))
        return NULL;
    PyObject *result = NULL;
    sink_t s;
    long long value = 0;
    if (kp_sink_parse(&s, &data, dpos, &offs, &wbuf, k) < 0)
        goto done;
    int status = kp_take_snappy((const uint8_t *)buf.buf, buf.len, &s, &value);
    result = Py_BuildValue("(iLnnn)", status, value, s.dpos, s.k, s.m);
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&data);
    PyBuffer_Release(&offs);
    PyBuffer_Release(&wbuf);
    return result;
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
