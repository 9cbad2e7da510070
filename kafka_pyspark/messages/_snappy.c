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
        uint8_t tag = *ip++;
        size_t len, off;
        if ((tag & 3) == 0) {
            len = tag >> 2;
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
            if (len <= 32 && in_end - ip >= 32 && op_end - op >= 32) {
                memcpy(op, ip, 16); /* the bytes past len are written again later */
                memcpy(op + 16, ip + 16, 16);
            } else {
                memcpy(op, ip, len);
            }
            op += len;
            ip += len;
            continue;
        }
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
        /* in steps of 16 or 8 bytes (from + i + step <= op + i: already written), possibly
         * past len: those bytes are written again later */
        if (off >= 16 && (size_t)(op_end - op) >= len + 16) {
            for (size_t i = 0; i < len; i += 16)
                memcpy(op + i, from + i, 16);
        } else if (off >= 8 && (size_t)(op_end - op) >= len + 8) {
            for (size_t i = 0; i < len; i += 8)
                memcpy(op + i, from + i, 8);
        } else if ((size_t)(op_end - op) >= len + 16) {
            /* off < 8: copy 8 bytes at a time from a fixed source; each step makes `step` more
             * bytes right, so the pattern doubles until it is 8 bytes long */
            uint8_t *stop = op + len;
            uint64_t word;
            while ((size_t)(op - from) < 8) {
                size_t step = (size_t)(op - from);
                memcpy(&word, from, 8);
                memcpy(op, &word, 8);
                op += step;
            }
            for (; op < stop; op += 8, from += 8)
                memcpy(op, from, 8);
            op = stop;
            continue;
        } else if (off >= len) {
            memcpy(op, from, len);
        } else {
            for (size_t i = 0; i < len; i++) /* a repeating pattern */
                op[i] = from[i];
        }
        op += len;
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
static int take_snappy(const uint8_t *p, Py_ssize_t n, sink_t *s, long long *value)
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
    int status = take_snappy((const uint8_t *)buf.buf, buf.len, &s, &value);
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

/* snappy_total(buf, recs): the bytes the snappy wrappers of recs decompress to, all together;
 * -1 if one is not snappy or not a payload this kernel decodes */
PyObject *kp_snappy_total(PyObject *self, PyObject *args)
{
    Py_buffer buf, recbuf;
    if (!PyArg_ParseTuple(args, "y*y*", &buf, &recbuf))
        return NULL;
    const rec_t *recs = (const rec_t *)recbuf.buf;
    Py_ssize_t n = recbuf.len / (Py_ssize_t)sizeof(rec_t);
    long long total = 0;
    for (Py_ssize_t i = 0; i < n && total >= 0; i++) {
        const rec_t *r = &recs[i];
        int64_t start = payload_start(r), size = payload_size(r);
        if (r->codec != 2 || r->start < 0 || r->magic != 1 || size < 0 ||
            start + size > buf.len) {
            total = -1;
            break;
        }
        int64_t one = kp_snappy_payload_size((const uint8_t *)buf.buf + start, size);
        total = one < 0 ? -1 : total + one;
    }
    PyBuffer_Release(&buf);
    PyBuffer_Release(&recbuf);
    return PyLong_FromLongLong(total);
}


/* --- a whole outer set of snappy wrappers ---------------------------------------------------- */

#define CHECK_OK 0xFFFFFFFFu /* see crc.py: the CRC of payloads + CRC words when all are right */
#define CHECK_CHUNK (256 << 10) /* payload bytes checked at a time, while in cache */

/* crc32(p[0:n], init) by the Python callable `fn` (ISA-L's, through a memoryview: no copy) */
static int call_crc(PyObject *fn, const uint8_t *p, Py_ssize_t n, uint32_t init, uint32_t *out)
{
    PyObject *view = PyMemoryView_FromMemory((char *)p, n, PyBUF_READ);
    if (!view)
        return -1;
    PyObject *r = PyObject_CallFunction(fn, "Ok", view, (unsigned long)init);
    Py_DECREF(view);
    if (!r)
        return -1;
    *out = (uint32_t)PyLong_AsUnsignedLongMask(r);
    Py_DECREF(r);
    return PyErr_Occurred() ? -1 : 0;
}

static void xor_range(sink_t *s, Py_ssize_t k0, Py_ssize_t k1)
{
    for (Py_ssize_t i = k0; i < k1; i++) {
        uint8_t *at = s->data + s->offsets[i + 1];
        uint32_t w = s->words[i];
        at[0] ^= (uint8_t)w;
        at[1] ^= (uint8_t)(w >> 8);
        at[2] ^= (uint8_t)(w >> 16);
        at[3] ^= (uint8_t)(w >> 24);
    }
}

/* Whether payloads k0..k1-1 of the sink match their CRC words (1, 0; -1 raised). The sink
 * has 4 bytes to spare after them (its capacity is checked here). */
static int check_range(sink_t *s, Py_ssize_t k0, Py_ssize_t k1, PyObject *fn)
{
    Py_ssize_t lo = s->offsets[k0], hi = s->offsets[k1];
    if (k0 == k1)
        return 1;
    if (hi > s->dcap - 4) {
        PyErr_SetString(PyExc_ValueError, "snappy_fetch: no room for the last CRC word");
        return -1;
    }
    memset(s->data + hi, 0, 4);
    xor_range(s, k0, k1);
    uint32_t crc;
    int r = call_crc(fn, s->data + lo, hi + 4 - lo, CHECK_OK, &crc);
    xor_range(s, k0, k1);
    return r < 0 ? -1 : crc == CHECK_OK;
}

/* snappy_fetch(buf, recs, data, offsets, words, counts, crc32, verify)
 *     -> (status, i, dpos, k)
 * For every snappy wrapper recs[i] of buf, in order: its CRC32 checked (when verify, by the
 * callable crc32), its payload decompressed and taken into the sink at (dpos, k) as
 * snappy_take does, counts[i] = the rows it held; the rows' CRCs checked a CHECK_CHUNK at a
 * time. Stops at the first wrapper i that is anything else (status ST_BAD_CRC, ST_BAD_SNAPPY
 * or a take status): the caller then decodes the set on the general path. */
PyObject *kp_snappy_fetch(PyObject *self, PyObject *args)
{
    Py_buffer buf, recbuf, data, offs, wbuf, cbuf;
    PyObject *fn, *result = NULL;
    int verify;
    if (!PyArg_ParseTuple(args, "y*y*w*w*w*w*Op", &buf, &recbuf, &data, &offs, &wbuf, &cbuf,
                          &fn, &verify))
        return NULL;
    const rec_t *recs = (const rec_t *)recbuf.buf;
    const uint8_t *p = (const uint8_t *)buf.buf;
    int64_t *counts = (int64_t *)cbuf.buf;
    Py_ssize_t n = recbuf.len / (Py_ssize_t)sizeof(rec_t), i = 0, checked = 0;
    int status = ST_END;
    sink_t s;
    if (kp_sink_parse(&s, &data, 0, &offs, &wbuf, 0) < 0)
        goto done;
    if (cbuf.len / (Py_ssize_t)sizeof(int64_t) < n) {
        PyErr_SetString(PyExc_ValueError, "snappy_fetch: counts shorter than recs");
        goto done;
    }
    for (; i < n; i++) {
        const rec_t *r = &recs[i];
        int64_t start = payload_start(r), size = payload_size(r);
        if (r->codec != 2 || r->magic != 1 || r->start < 0 || size < 0 ||
            start + size > buf.len) {
            status = ST_BAD_SNAPPY;
            break;
        }
        uint32_t crc;
        if (verify && call_crc(fn, p + start, size, 0, &crc) < 0)
            goto done;
        if (verify && crc != r->crc) {
            status = ST_BAD_CRC;
            break;
        }
        Py_ssize_t before = s.k;
        long long value;
        status = take_snappy(p + start, size, &s, &value);
        if (status != ST_END)
            break;
        counts[i] = s.k - before;
        if (verify && (s.dpos - s.offsets[checked] >= CHECK_CHUNK || i == n - 1)) {
            int ok = check_range(&s, checked, s.k, fn);
            if (ok < 0)
                goto done;
            if (!ok) {
                status = ST_BAD_CRC;
                break;
            }
            checked = s.k;
        }
    }
    result = Py_BuildValue("(innn)", status, i, s.dpos, s.k);
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&recbuf);
    PyBuffer_Release(&data);
    PyBuffer_Release(&offs);
    PyBuffer_Release(&wbuf);
    PyBuffer_Release(&cbuf);
    return result;
}
