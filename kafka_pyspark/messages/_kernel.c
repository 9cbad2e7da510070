/* The per-message work of decoding Kafka 0.7 message sets, compiled.
 *
 * Layout (kafka_pyspark/messages/layout.py, seed 003):
 *
 *   int32 LENGTH | int8 MAGIC | [int8 ATTRIBUTES if MAGIC == 1] | uint32 CRC32 | PAYLOAD
 *
 * Three functions, all on buffers (buffer protocol; no numpy C API):
 *
 *   scan(buf, pos, end, stop, out) -> (n, pos, status, value, leaf_count, leaf_bytes)
 *       follows LENGTH from buf[pos] while pos < min(end, stop), checks every header and
 *       writes one 24-byte record per complete message into `out` (see rec_t), stopping at
 *       the first message that is incomplete or malformed (`status`, `value` say why).
 *   gather(buf, recs, i0, i1, data, dpos, offsets, words, k) -> (dpos, k)
 *       copies the payloads of the uncompressed messages among recs[i0:i1] to data[dpos:],
 *       writes their int32 end positions to offsets[k+1:] and their CRC words (below) to
 *       words[k:].
 *   xor_words(data, offsets, words, count)
 *       xors every CRC word, little-endian, into the 4 bytes after its payload's end (an
 *       involution: calling it twice restores `data`).
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
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* keep in step with kafka_pyspark/messages/layout.py and walk.py */
#define LENGTH_SIZE 4
#define MIN_LENGTH 5          /* MAGIC + CRC32, empty payload (magic 0) */
#define MIN_LENGTH_V1 6       /* MAGIC + ATTRIBUTES + CRC32 (magic 1) */
#define MAX_MESSAGE_LENGTH (1 << 30)
#define CODEC_MASK 0x03

enum {
    ST_END = 0,        /* reached min(end, stop) */
    ST_SHORT = 1,      /* fewer than 4 bytes left: LENGTH unreadable */
    ST_PARTIAL = 2,    /* LENGTH readable (value), the message continues past `end` */
    ST_BAD_LENGTH = 3, /* LENGTH (value) out of range */
    ST_BAD_MAGIC = 4,  /* MAGIC (value) not 0 or 1 */
    ST_BAD_CODEC = 5,  /* ATTRIBUTES (value) name codec 3 */
    ST_SHORT_V1 = 6    /* magic 1 with LENGTH (value) below its 6-byte header */
};

typedef struct {
    int64_t start;  /* position of LENGTH in the buffer */
    int32_t length; /* LENGTH */
    uint32_t crc;   /* stored CRC32 */
    uint8_t magic;
    uint8_t codec;  /* ATTRIBUTES & 3 (magic 1), else 0 */
    uint8_t pad[6];
} rec_t;

/* The walk is a chain of dependent loads (each LENGTH gives the next position), so a buffer
 * that is not in cache costs a full memory latency per message. Messages are back to back, so
 * the lines ahead of the walk are prefetched as it goes: it then runs at memory bandwidth. */
#define PREFETCH_AHEAD 8192
#if defined(__GNUC__)
#define PREFETCH(addr) __builtin_prefetch(addr)
#else
#define PREFETCH(addr) ((void)0)
#endif

static inline uint32_t be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline int64_t payload_start(const rec_t *r)
{
    return r->start + LENGTH_SIZE + 1 + r->magic + 4;
}

static inline int64_t payload_size(const rec_t *r)
{
    return (int64_t)r->length - 1 - r->magic - 4;
}

/* --- CRC-32 of runs of zero bytes ---------------------------------------------------------
 * zlib's reflected CRC-32 (polynomial 0xEDB88320). Feeding n zero bytes multiplies the register
 * by x^(8n) modulo the polynomial; zeros_crc(n) = ~(~0 * x^(8n)). A table serves the payload
 * sizes that occur in practice; longer ones square-and-multiply.
 */
#define POLY 0xEDB88320u
#define ZERO_TABLE 65536
static uint32_t byte_table[256];
static uint32_t zero_table[ZERO_TABLE];
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

static uint32_t zeros_crc(int64_t n)
{
    if (n < ZERO_TABLE)
        return zero_table[n];
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
    for (int n = 0; n < ZERO_TABLE; n++) {
        zero_table[n] = ~reg;
        reg = (reg >> 8) ^ byte_table[reg & 0xFF];
    }
    x2n[0] = 1u << 30; /* x^1 */
    for (int k = 1; k < 64; k++)
        x2n[k] = mulmod(x2n[k - 1], x2n[k - 1]);
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
    Py_ssize_t n = 0, leaves = 0;
    long long leaf_bytes = 0, value = 0;
    int status = ST_END;
    Py_ssize_t fetched = pos; /* lines before this one are prefetched */
    while (pos < limit) {
        Py_ssize_t ahead = pos + PREFETCH_AHEAD < end ? pos + PREFETCH_AHEAD : end;
        for (; fetched < ahead; fetched += 64)
            PREFETCH(p + fetched);
        if (end - pos < LENGTH_SIZE) {
            status = ST_SHORT;
            break;
        }
        int32_t length = (int32_t)be32(p + pos);
        if (length < MIN_LENGTH || length > MAX_MESSAGE_LENGTH) {
            status = ST_BAD_LENGTH;
            value = length;
            break;
        }
        if ((Py_ssize_t)length > end - pos - LENGTH_SIZE) {
            status = ST_PARTIAL;
            value = length;
            break;
        }
        const uint8_t *m = p + pos + LENGTH_SIZE;
        uint8_t magic = m[0], codec = 0;
        uint32_t crc;
        if (magic == 1) {
            if (length < MIN_LENGTH_V1) {
                status = ST_SHORT_V1;
                value = length;
                break;
            }
            codec = m[1] & CODEC_MASK;
            if (codec == 3) {
                status = ST_BAD_CODEC;
                value = m[1];
                break;
            }
            crc = be32(m + 2);
        } else if (magic == 0) {
            crc = be32(m + 1);
        } else {
            status = ST_BAD_MAGIC;
            value = magic;
            break;
        }
        if (n >= cap) {
            PyErr_Format(PyExc_ValueError, "scan: more than %zd messages for the output", cap);
            goto done;
        }
        rec_t *r = &recs[n++];
        r->start = pos;
        r->length = length;
        r->crc = crc;
        r->magic = magic;
        r->codec = codec;
        memset(r->pad, 0, sizeof(r->pad));
        if (codec == 0) {
            leaves++;
            leaf_bytes += payload_size(r);
        }
        pos += LENGTH_SIZE + (Py_ssize_t)length;
    }
    result = Py_BuildValue("(nniLnL)", n, pos, status, value, leaves, leaf_bytes);
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&out);
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
        int64_t start = payload_start(r), size = payload_size(r);
        if (r->start < 0 || r->magic > 1 || size < 0 || start + size > buf.len ||
            size > data.len - dpos || dpos + size > INT32_MAX || k + 1 >= noff || k >= nwords) {
            PyErr_Format(PyExc_ValueError, "gather: record %zd does not fit its buffers", i);
            goto done;
        }
        memcpy(d + dpos, p + start, (size_t)size);
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

static PyObject *xor_words(PyObject *self, PyObject *args)
{
    Py_buffer data, offs, wbuf;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "w*y*y*n", &data, &offs, &wbuf, &count))
        return NULL;
    PyObject *result = NULL;
    uint8_t *d = (uint8_t *)data.buf;
    const int32_t *offsets = (const int32_t *)offs.buf;
    const uint32_t *words = (const uint32_t *)wbuf.buf;
    if (count < 0 || count + 1 > offs.len / (Py_ssize_t)sizeof(int32_t) ||
        count > wbuf.len / (Py_ssize_t)sizeof(uint32_t)) {
        PyErr_SetString(PyExc_ValueError, "xor_words: count out of range");
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
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
    return PyLong_FromUnsignedLong(zeros_crc(n));
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "Walk and check the messages of a buffer into records."},
    {"gather", gather, METH_VARARGS, "Copy uncompressed payloads; their ends and CRC words."},
    {"xor_words", xor_words, METH_VARARGS, "Xor CRC words after the payload ends."},
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

PyMODINIT_FUNC PyInit__kernel(void)
{
    init_tables();
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "RECORD_SIZE", (long)sizeof(rec_t)) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
