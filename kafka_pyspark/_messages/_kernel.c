/* The per-message work of decoding Kafka 0.7 message sets, compiled.
 *
 * Layout (kafka_pyspark/_messages/layout.py, docs/dev/PROTOCOL.md "Messages"):
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
 *   check_rows(data, offsets, words, k0, k1, crc32) -> bool
 *       whether payloads k0..k1-1 (back to back in data, ending at the offsets) match their
 *       CRC words (below), by one CRC call with the engine crc32 (_wrappers.c's kp_rows_ok,
 *       the check the lanes make in C).
 *   snappy_size / snappy_raw: _snappy.c (our snappy decoder); snappy_total / snappy_take /
 *       snappy_fetch: _wrappers.c (snappy wrappers decompressed into the value column).
 *   _C_API: a capsule holding `take`'s C functions, the CRC engine's parsing and the rows'
 *       CRC check (see _kernel.h) for _gzip.c's gzip lane.
 *
 * The files of the module point one way: _module.c (the method table, the capsule, the
 * module's init) uses all; _wrappers.c (the snappy lane, the CRC engines and the rows' check)
 * uses this file's walk into a sink and _snappy.c's decoder; this file and _snappy.c use
 * nothing of the others.
 *
 * scan and take are one walk (_kernel.h's kp_walk) with two visitors: scan_one below, and
 * take_one (_kernel.h), which the snappy lane (_snappy.c) and the gzip lane also use.
 *
 * The CRC check of all payloads is then one CRC-32 call over `data` (kafka_pyspark/_messages/
 * crc.py explains why): with word_i = crc_i ^ crc32(i zero bytes of len(P_i)) xored after each
 * payload, CRC-32 of data (+4 zero bytes) started from CHECK_OK returns CHECK_OK exactly when
 * every stored CRC is right (_wrappers.c's kp_rows_ok: check_rows, and the lanes in C).
 *
 * Nothing here trusts a length: every LENGTH is range-checked before use, every record
 * handed back in is checked against the buffer it points into, every write against the
 * capacity of its target. Bad input data is reported by status; a record or a buffer that
 * does not fit (a caller's bug) raises ValueError.
 */
#include "_kernel.h"

/* --- scan --------------------------------------------------------------------------------- */

typedef struct {
    rec_t *next, *full; /* the next record to write; the end of the output */
    Py_ssize_t leaves;
    long long leaf_bytes;
} scanner_t;

/* One message for scan: its record, counted as a leaf when plain; KP_RAISED when the records
 * do not fit the output (a caller's bug). */
static inline int scan_one(void *ctx, const uint8_t *p, Py_ssize_t pos, Py_ssize_t end,
                           const head_t *h, long long *value)
{
    scanner_t *s = (scanner_t *)ctx;
    if (s->next == s->full) {
        PyErr_SetString(PyExc_ValueError, "scan: more messages than records in the output");
        return KP_RAISED;
    }
    rec_t *r = s->next++;
    r->start = pos;
    r->length = h->length;
    r->crc = h->crc;
    r->magic = h->magic;
    r->codec = h->codec;
    memset(r->pad, 0, sizeof(r->pad));
    if (h->codec == CODEC_NONE) {
        s->leaves++;
        s->leaf_bytes += payload_size(h->length, h->magic);
    }
    return ST_END;
}

PyObject *kp_scan_py(PyObject *self, PyObject *args)
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
    rec_t *recs = (rec_t *)out.buf;
    scanner_t s = {recs, recs + out.len / (Py_ssize_t)sizeof(rec_t), 0, 0};
    long long value = 0;
    int status = kp_walk((const uint8_t *)buf.buf, &pos, end, stop, AHEAD_SMALL, scan_one, &s,
                         &value);
    if (status != KP_RAISED)
        result = Py_BuildValue("(nniLnL)", (Py_ssize_t)(s.next - recs), pos, status, value,
                               s.leaves, s.leaf_bytes);
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&out);
    return result;
}

/* --- take: scan and gather in one pass ------------------------------------------------------ */

/* Walks plain messages from *at, copying each payload into the sink (memmove: the sink's
 * data may be the very buffer walked, behind the walk): kp_sink_take. */
int kp_take(const uint8_t *p, Py_ssize_t *at, Py_ssize_t end, Py_ssize_t stop, sink_t *s,
            long long *value)
{
    return kp_sink_take(p, at, end, stop, s, value, 0);
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

PyObject *kp_take_py(PyObject *self, PyObject *args)
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

PyObject *kp_gather_py(PyObject *self, PyObject *args)
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
        if (r->codec != CODEC_NONE)
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

PyObject *kp_zeros_crc_py(PyObject *self, PyObject *arg)
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
