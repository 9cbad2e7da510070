/* The per-message work of decoding Kafka 0.7 message sets, compiled.
 *
 * Layout (kafka_pyspark/messages/layout.py, seed 003):
 *
 *   int32 LENGTH | int8 MAGIC | [int8 ATTRIBUTES if MAGIC == 1] | uint32 CRC32 | PAYLOAD
 *
 * The functions, all on buffers (buffer protocol; no numpy C API):
 *
 *   scan(buf, pos, end, stop, out) -> (n, pos, status, value, leaf_count, leaf_bytes)
 *       follows LENGTH from buf[pos] while pos < min(end, stop), checks every header and
 *       writes one 24-byte record per complete message into `out` (see rec_t), stopping at
 *       the first message that is incomplete or malformed (`status`, `value` say why).
 *   gather(buf, recs, i0, i1, data, dpos, offsets, words, k) -> (dpos, k)
 *       copies the payloads of the uncompressed messages among recs[i0:i1] to data[dpos:],
 *       writes their int32 end positions to offsets[k+1:] and their CRC words (below) to
 *       words[k:].
 *   take(buf, pos, end, stop, base, data, dpos, offsets, words, k, starts)
 *       -> (m, pos, status, value, dpos, k)
 *       scan and gather in one pass, for the fast lane (flat.py): plain messages only (a
 *       wrapper stops it with ST_WRAPPER), payloads straight into data, the absolute offsets
 *       base + position into starts (or None).
 *   xor_words(data, offsets, words, k0, k1)
 *       xors CRC words k0..k1-1, little-endian, into the 4 bytes after their payloads' ends
 *       (an involution: calling it twice restores `data`).
 *   snappy_size / snappy_total / snappy_take / snappy_fetch / snappy_raw: _snappy.c and
 *       _wrappers.c (snappy wrappers, decompressed by our own decoder into the value column).
 *   _C_API: a capsule holding `take`'s C functions (see _kernel.h) for _gzip.c's gzip lane.
 *
 * The CRC check of all payloads is then one CRC-32 call over `data` (kafka_pyspark/messages/
 * crc.py explains why): with word_i = crc_i ^ crc32(i zero bytes of len(P_i)) xored after each
 * payload, CRC-32 of data (+4 zero bytes) started from 0xFFFFFFFF returns 0xFFFFFFFF exactly
 * when every stored CRC is right.
 *
 * Nothing here trusts a length: every LENGTH is range-checked before use, every record
 * handed back in is checked against the buffer it points into, every write against the
 * capacity of its target. Bad input data is reported by status; a record or a buffer that
 * does not fit (a caller's bug) raises ValueError.
 */
#include <stddef.h>
#include <string.h>

#include "_kernel.h"

/* The walk is a chain of dependent loads (each LENGTH gives the next position), so a buffer
 * that is not in cache costs a full memory latency per message. Messages are back to back, so
 * the lines ahead of the walk are prefetched as it goes: it then runs at memory bandwidth. */
#define PREFETCH_AHEAD 8192
#define PREFETCH_BIG 4096 /* scan: messages this long (wrappers) are walked without it */
#if defined(__GNUC__)
#define PREFETCH(addr) __builtin_prefetch(addr)
#else
#define PREFETCH(addr) ((void)0)
#endif

/* --- CRC-32 of runs of zero bytes ---------------------------------------------------------
 * zlib's reflected CRC-32 (polynomial 0xEDB88320). Feeding n zero bytes multiplies the register
 * by x^(8n) modulo the polynomial; zeros_crc(n) = ~(~0 * x^(8n)). A table serves the payload
 * sizes that occur in practice; longer ones square-and-multiply.
 */
#define POLY 0xEDB88320u
static uint32_t byte_table[256];
uint32_t kp_zero_table[KP_ZERO_TABLE];
static uint32_t x2n[64]; /* x^(2^k) mod P */

static uint32_t mulmod(uint32_t a, uint32_t b)
{
    /* a * b mod P, bit 31 being x^0 (reflected) */
    uint32_t product = 0;
    for (uint32_t m = 1u << 31; m; m >>= 1) {
        if (a & m)
            product ^= b;
        b = (b & 1) ? (b >> 1) ^ POLY : b >> 1;
    }
    return product;
}

uint32_t kp_zeros_crc(int64_t n)
{
    if (n < KP_ZERO_TABLE)
        return kp_zero_table[n];
    uint64_t bits = (uint64_t)n * 8;
    uint32_t reg = 0xFFFFFFFFu;
    for (int k = 0; bits; k++, bits >>= 1)
        if (bits & 1)
            reg = mulmod(x2n[k], reg);
    return ~reg;
}

static void init_tables(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int j = 0; j < 8; j++)
            c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        byte_table[i] = c;
    }
    uint32_t reg = 0xFFFFFFFFu;
    for (int n = 0; n < KP_ZERO_TABLE; n++) {
        kp_zero_table[n] = ~reg;
        reg = (reg >> 8) ^ byte_table[reg & 0xFF];
    }
    x2n[0] = 1u << 30; /* x^1 */
    for (int k = 1; k < 64; k++)
        x2n[k] = mulmod(x2n[k - 1], x2n[k - 1]);
}

static inline void prefetch_to(const uint8_t *p, Py_ssize_t *fetched, Py_ssize_t pos,
                               Py_ssize_t end)
{
    Py_ssize_t ahead = pos + PREFETCH_AHEAD < end ? pos + PREFETCH_AHEAD : end;
    for (; *fetched < ahead; *fetched += 64)
        PREFETCH(p + *fetched);
}

/* --- scan --------------------------------------------------------------------------------- */

static PyObject *scan(PyObject *self, PyObject *args)
{
    Py_buffer buf, out;
    Py_ssize_t pos, end, stop;
    if (!PyArg_ParseTuple(args, "y*nnnw*", &buf, &pos, &end, &stop, &out))
        return NULL;
    PyObject *result = NULL;
    if (pos < 0 || end < pos || end > buf.len) {
        PyErr_Format(PyExc_ValueError, "scan: bad range [%zd, %zd) of a %zd-byte buffer", pos,
                     end, buf.len);
        goto done;
    }
    const uint8_t *p = (const uint8_t *)buf.buf;
    rec_t *recs = (rec_t *)out.buf;
    Py_ssize_t cap = out.len / (Py_ssize_t)sizeof(rec_t);
    Py_ssize_t limit = stop < end ? stop : end;
    Py_ssize_t n = 0, leaves = 0, fetched = pos;
    long long leaf_bytes = 0, value = 0;
    int status = ST_END;
    head_t h;
    int big = 0;
    while (pos < limit) {
        if (big)
            fetched = pos; /* after a big message: no read ahead of the next one's body */
        else
            prefetch_to(p, &fetched, pos, end);
        status = read_head(p, pos, end, &h, &value);
        if (status != ST_END)
            break;
        if (n >= cap) {
            PyErr_Format(PyExc_ValueError, "scan: more than %zd messages for the output", cap);
            goto done;
        }
        rec_t *r = &recs[n++];
        r->start = pos;
        r->length = h.length;
        r->crc = h.crc;
        r->magic = h.magic;
        r->codec = h.codec;
        memset(r->pad, 0, sizeof(r->pad));
        if (h.codec == 0) {
            leaves++;
            leaf_bytes += payload_size(r);
        }
        big = h.length >= PREFETCH_BIG;
        pos += LENGTH_SIZE + (Py_ssize_t)h.length;
    }
    result = Py_BuildValue("(nniLnL)", n, pos, status, value, leaves, leaf_bytes);
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&out);
    return result;
}

/* --- take: scan and gather in one pass ------------------------------------------------------ */

/* Copies n bytes from src down to dst (dst <= src: they may overlap, as in snappy_take's
 * compaction) with room bytes free to write at dst and avail readable at src: short payloads
 * in 16-byte steps, forward (each store lands before the bytes still to be read), possibly
 * past n, within room and avail; others by memmove. */
static inline void copy_down(uint8_t *dst, const uint8_t *src, Py_ssize_t n, Py_ssize_t room,
                             Py_ssize_t avail)
{
    if (n <= 64 && room >= 64 && avail >= 64) {
        for (Py_ssize_t i = 0; i < n; i += 16) {
            uint8_t chunk[16];
            memcpy(chunk, src + i, 16);
            memcpy(dst + i, chunk, 16);
        }
    } else {
        memmove(dst, src, (size_t)n);
    }
}

/* Walks plain messages from *pos as scan does, copying each payload into the sink (memmove:
 * the sink's data may be the very buffer walked, behind the walk), until min(end, stop), a
 * problem (its status), a compressed message (ST_WRAPPER) or a full sink (ST_FULL). */
int kp_take(const uint8_t *p, Py_ssize_t *at, Py_ssize_t end, Py_ssize_t stop, sink_t *s,
            long long *value)
{
    Py_ssize_t pos = *at, limit = stop < end ? stop : end, fetched = pos;
    /* the sink's state in locals: the copies below could alias it for the compiler */
    uint8_t *const data = s->data;
    int32_t *const offsets = s->offsets;
    uint32_t *const words = s->words;
    int64_t *const starts = s->starts;
    Py_ssize_t dpos = s->dpos, k = s->k, m = s->m;
    Py_ssize_t rows = s->ocap - 1 < s->wcap ? s->ocap - 1 : s->wcap; /* k < rows */
    if (starts && s->scap - 1 < rows - k + m)
        rows = s->scap - 1 - m + k; /* m + 1 < scap */
    int status = ST_END;
    head_t h;
    while (pos < limit) {
        prefetch_to(p, &fetched, pos, end);
        status = read_head(p, pos, end, &h, value);
        if (status != ST_END)
            break;
        if (h.codec) {
            status = ST_WRAPPER;
            *value = h.attributes;
            break;
        }
        Py_ssize_t skip = LENGTH_SIZE + 1 + h.magic + 4;
        Py_ssize_t size = (Py_ssize_t)h.length - 1 - h.magic - 4;
        if (size > s->dcap - dpos || dpos + size > INT32_MAX || k >= rows) {
            status = ST_FULL;
            break;
        }
        Py_ssize_t room = s->dcap - dpos;
        if (data == p && pos + skip - dpos + size < room)
            room = pos + skip - dpos + size; /* in place: the bytes after the payload are unread */
        copy_down(data + dpos, p + pos + skip, size, room, end - pos - skip);
        dpos += size;
        words[k] = h.crc ^ zeros_crc(size);
        offsets[++k] = (int32_t)dpos;
        if (starts)
            starts[m] = s->base + pos;
        m++;
        pos += LENGTH_SIZE + (Py_ssize_t)h.length;
    }
    if (starts)
        starts[m] = s->base + pos; /* scap > m: checked at parse and per message */
    s->dpos = dpos;
    s->k = k;
    s->m = m;
    *at = pos;
    return status;
}

/* data, offsets, words as a sink at (dpos, k); sets offsets[k] = dpos. 0, or -1 raised. */
int kp_sink_parse(sink_t *s, Py_buffer *data, Py_ssize_t dpos, Py_buffer *offs,
                  Py_buffer *wbuf, Py_ssize_t k)
{
    memset(s, 0, sizeof(*s));
    s->data = (uint8_t *)data->buf;
    s->dcap = data->len;
    s->offsets = (int32_t *)offs->buf;
    s->ocap = offs->len / (Py_ssize_t)sizeof(int32_t);
    s->words = (uint32_t *)wbuf->buf;
    s->wcap = wbuf->len / (Py_ssize_t)sizeof(uint32_t);
    if (dpos < 0 || dpos > s->dcap || dpos > INT32_MAX || k < 0 || k >= s->ocap) {
        PyErr_SetString(PyExc_ValueError, "take: sink position out of range");
        return -1;
    }
    s->dpos = dpos;
    s->k = k;
    s->offsets[k] = (int32_t)dpos;
    return 0;
}

static PyObject *take(PyObject *self, PyObject *args)
{
    Py_buffer buf, data, offs, wbuf, sbuf = {0};
    Py_ssize_t pos, end, stop, dpos, k;
    long long base;
    PyObject *starts, *result = NULL;
    if (!PyArg_ParseTuple(args, "y*nnnLw*nw*w*nO", &buf, &pos, &end, &stop, &base, &data,
                          &dpos, &offs, &wbuf, &k, &starts))
        return NULL;
    sink_t s;
    if (kp_sink_parse(&s, &data, dpos, &offs, &wbuf, k) < 0)
        goto done;
    if (pos < 0 || end < pos || end > buf.len) {
        PyErr_Format(PyExc_ValueError, "take: bad range [%zd, %zd) of a %zd-byte buffer", pos,
                     end, buf.len);
        goto done;
    }
    if (starts != Py_None) {
        if (PyObject_GetBuffer(starts, &sbuf, PyBUF_WRITABLE) < 0)
            goto done;
        s.starts = (int64_t *)sbuf.buf;
        s.scap = sbuf.len / (Py_ssize_t)sizeof(int64_t);
        s.base = base;
        if (s.scap < 1) {
            PyErr_SetString(PyExc_ValueError, "take: no room for the starts");
            goto done;
        }
    }
    long long value = 0;
    int status = kp_take((const uint8_t *)buf.buf, &pos, end, stop, &s, &value);
    result = Py_BuildValue("(nniLnn)", s.m, pos, status, value, s.dpos, s.k);
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&data);
    PyBuffer_Release(&offs);
    PyBuffer_Release(&wbuf);
    if (sbuf.obj)
        PyBuffer_Release(&sbuf);
    return result;
}

/* --- gather ------------------------------------------------------------------------------- */

static PyObject *gather(PyObject *self, PyObject *args)
{
    Py_buffer buf, recbuf, data, offs, wbuf;
    Py_ssize_t i0, i1, dpos, k;
    if (!PyArg_ParseTuple(args, "y*y*nnw*nw*w*n", &buf, &recbuf, &i0, &i1, &data, &dpos, &offs,
                          &wbuf, &k))
        return NULL;
    PyObject *result = NULL;
    const uint8_t *p = (const uint8_t *)buf.buf;
    const rec_t *recs = (const rec_t *)recbuf.buf;
    uint8_t *d = (uint8_t *)data.buf;
    int32_t *offsets = (int32_t *)offs.buf;
    uint32_t *words = (uint32_t *)wbuf.buf;
    Py_ssize_t nrec = recbuf.len / (Py_ssize_t)sizeof(rec_t);
    Py_ssize_t noff = offs.len / (Py_ssize_t)sizeof(int32_t);
    Py_ssize_t nwords = wbuf.len / (Py_ssize_t)sizeof(uint32_t);
    if (i0 < 0 || i1 < i0 || i1 > nrec || dpos < 0 || dpos > data.len || dpos > INT32_MAX ||
        k < 0 || k >= noff) {
        PyErr_SetString(PyExc_ValueError, "gather: arguments out of range");
        goto done;
    }
    offsets[k] = (int32_t)dpos;
    for (Py_ssize_t i = i0; i < i1; i++) {
        const rec_t *r = &recs[i];
        if (r->codec)
            continue;
        int64_t size;
        const uint8_t *payload = rec_payload(r, p, buf.len, &size);
        if (!payload || size > data.len - dpos || dpos + size > INT32_MAX || k + 1 >= noff ||
            k >= nwords) {
            PyErr_Format(PyExc_ValueError, "gather: record %zd does not fit its buffers", i);
            goto done;
        }
        memcpy(d + dpos, payload, (size_t)size);
        dpos += size;
        words[k] = r->crc ^ zeros_crc(size);
        offsets[++k] = (int32_t)dpos;
    }
    result = Py_BuildValue("(nn)", dpos, k);
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&recbuf);
    PyBuffer_Release(&data);
    PyBuffer_Release(&offs);
    PyBuffer_Release(&wbuf);
    return result;
}

/* xor_words(data, offsets, words, k0, k1): xors words[k] after the end offsets[k + 1] of every
 * payload k0 <= k < k1 (an involution: calling it twice restores data) */
static PyObject *xor_words(PyObject *self, PyObject *args)
{
    Py_buffer data, offs, wbuf;
    Py_ssize_t k0, k1;
    if (!PyArg_ParseTuple(args, "w*y*y*nn", &data, &offs, &wbuf, &k0, &k1))
        return NULL;
    PyObject *result = NULL;
    uint8_t *d = (uint8_t *)data.buf;
    const int32_t *offsets = (const int32_t *)offs.buf;
    const uint32_t *words = (const uint32_t *)wbuf.buf;
    if (k0 < 0 || k1 < k0 || k1 + 1 > offs.len / (Py_ssize_t)sizeof(int32_t) ||
        k1 > wbuf.len / (Py_ssize_t)sizeof(uint32_t)) {
        PyErr_SetString(PyExc_ValueError, "xor_words: range out of bounds");
        goto done;
    }
    for (Py_ssize_t i = k0; i < k1; i++) {
        Py_ssize_t at = offsets[i + 1];
        if (at < 0 || at > data.len - 4) {
            PyErr_Format(PyExc_ValueError, "xor_words: end %zd outside the data", at);
            goto done;
        }
        uint32_t w = words[i];
        d[at] ^= (uint8_t)w;
        d[at + 1] ^= (uint8_t)(w >> 8);
        d[at + 2] ^= (uint8_t)(w >> 16);
        d[at + 3] ^= (uint8_t)(w >> 24);
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&offs);
    PyBuffer_Release(&wbuf);
    return result;
}

static PyObject *zeros_crc_py(PyObject *self, PyObject *arg)
{
    long long n = PyLong_AsLongLong(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "zeros_crc: negative size");
        return NULL;
    }
    return PyLong_FromUnsignedLong(kp_zeros_crc(n));
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "Walk and check the messages of a buffer into records."},
    {"gather", gather, METH_VARARGS, "Copy uncompressed payloads; their ends and CRC words."},
    {"xor_words", xor_words, METH_VARARGS, "Xor CRC words after the payload ends."},
    {"take", take, METH_VARARGS, "Walk plain messages, copying payloads: scan + gather."},
    {"snappy_size", kp_snappy_size, METH_O, "Bytes a snappy-java wrapper payload announces."},
    {"snappy_total", kp_snappy_total, METH_VARARGS, "Bytes snappy wrappers announce, together."},
    {"snappy_take", kp_snappy_take, METH_VARARGS, "Decompress a snappy wrapper in place, take."},
    {"snappy_fetch", kp_snappy_fetch, METH_VARARGS, "Check, decompress and take snappy wrappers."},
    {"crc_engine_at", kp_crc_engine_at, METH_O, "Use ISA-L's CRC-32 at this address in snappy_fetch."},
    {"wrapped_rows", kp_wrapped_rows, METH_VARARGS, "Per-row columns of a set of wrappers."},
    {"snappy_raw", kp_snappy_raw, METH_VARARGS, "Decompress one raw snappy block."},
    {"zeros_crc", zeros_crc_py, METH_O, "CRC-32 of n zero bytes."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_kernel",
    .m_doc = "Compiled per-message work of the Kafka 0.7 message-set decoder.",
    .m_size = -1,
    .m_methods = methods,
};

/* Every fact _kernel.h repeats from the Python side (walk.KERNEL_CONSTANTS): the loader does
 * not use a build whose values differ. */
static int add_constants(PyObject *m)
{
    const rec_t v0 = {.magic = 0}, v1 = {.magic = 1};
    const struct {
        const char *name;
        long value;
    } c[] = {
        {"RECORD_SIZE", (long)sizeof(rec_t)},
        {"RECORD_START", (long)offsetof(rec_t, start)},
        {"RECORD_LENGTH", (long)offsetof(rec_t, length)},
        {"RECORD_CRC", (long)offsetof(rec_t, crc)},
        {"RECORD_MAGIC", (long)offsetof(rec_t, magic)},
        {"RECORD_CODEC", (long)offsetof(rec_t, codec)},
        {"LENGTH_SIZE", LENGTH_SIZE},
        {"MIN_LENGTH", MIN_LENGTH},
        {"MIN_LENGTH_V1", MIN_LENGTH_V1},
        {"HEADER_V0_SIZE", (long)payload_start(&v0)},
        {"HEADER_V1_SIZE", (long)payload_start(&v1)},
        {"MAX_MESSAGE_LENGTH", MAX_MESSAGE_LENGTH},
        {"CODEC_MASK", CODEC_MASK},
        {"ST_END", ST_END},
        {"ST_SHORT", ST_SHORT},
        {"ST_PARTIAL", ST_PARTIAL},
        {"ST_BAD_LENGTH", ST_BAD_LENGTH},
        {"ST_BAD_MAGIC", ST_BAD_MAGIC},
        {"ST_BAD_CODEC", ST_BAD_CODEC},
        {"ST_SHORT_V1", ST_SHORT_V1},
        {"ST_WRAPPER", ST_WRAPPER},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        if (PyModule_AddIntConstant(m, c[i].name, c[i].value) < 0) {
            return -1;
        }
    }
    return 0;
}

PyMODINIT_FUNC PyInit__kernel(void)
{
    init_tables();
    kp_snappy_init();
    static const kp_capi_t capi = {KP_CAPI_VERSION, sizeof(rec_t), sizeof(sink_t), kp_take,
                                   kp_sink_parse, kp_direct_crc};
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    PyObject *capsule = PyCapsule_New((void *)&capi, KP_CAPI_NAME, NULL);
    if (add_constants(m) < 0 || !capsule || PyModule_AddObject(m, "_C_API", capsule) < 0) {
        Py_XDECREF(capsule);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
