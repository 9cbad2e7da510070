/* Outer sets of snappy wrappers, whole, in one call (the fast lane's snappy_fetch, see
 * kafka_pyspark/_messages/flat.py): every wrapper's CRC32, its payload decompressed and walked by
 * _snappy.c straight into the value column, the rows' CRC words checked while in cache. And
 * what both lanes (this one and _gzip.c's) share for their CRCs: the engines (crc_engine_at,
 * kp_crc_parse) and the check of taken rows against their CRC words (kp_rows_ok). */
#include "_kernel.h"

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
        int64_t size;
        const uint8_t *payload = wrapper_payload(r, CODEC_SNAPPY, (const uint8_t *)buf.buf,
                                                 buf.len, &size);
        if (!payload) {
            total = -1;
            break;
        }
        int64_t one = kp_snappy_payload_size(payload, size);
        total = one < 0 ? -1 : total + one;
    }
    PyBuffer_Release(&buf);
    PyBuffer_Release(&recbuf);
    return PyLong_FromLongLong(total);
}

/* --- a whole outer set of snappy wrappers ---------------------------------------------------- */

/* ISA-L's CRC-32, called directly when crc_engine_at found it in python-isal's module: no Python
 * call per wrapper (CRC_ISAL, here and in _gzip.c through kp_crc_parse). */
static kp_crc32_fn isal_crc;

/* crc_engine_at(address) -> bool: whether the function at address is a usable CRC-32
 * (kp_crc_fn_at); if so, the lanes call it for CRC_ISAL (a later False keeps the engine found
 * before). */
PyObject *kp_crc_engine_at(PyObject *self, PyObject *arg)
{
    kp_crc32_fn fn;
    int ok = kp_crc_fn_at(arg, &fn);
    if (ok < 0)
        return NULL;
    if (ok)
        isal_crc = fn;
    return PyBool_FromLong(ok);
}

int kp_crc_parse(PyObject *arg, kp_crc32_fn libdeflate, kp_crc_t *out, const char *who)
{
    out->direct = NULL;
    out->call = NULL;
    if (PyLong_CheckExact(arg)) {
        long engine = PyLong_AsLong(arg);
        out->direct = engine == CRC_ISAL ? isal_crc : engine == CRC_LIBDEFLATE ? libdeflate : NULL;
        if (out->direct)
            return 0;
        if (engine == CRC_ISAL || engine == CRC_LIBDEFLATE) {
            PyErr_Format(PyExc_ValueError, "%s: CRC-32 engine %ld is not there%s", who, engine,
                         engine == CRC_ISAL ? " (crc_engine_at did not find it)" : "");
            return -1;
        }
    } else if (PyCallable_Check(arg)) {
        out->call = arg;
        return 0;
    }
    if (!PyErr_Occurred())
        PyErr_Format(PyExc_TypeError, "%s: crc32 is not a CRC-32 engine (%d, %d) or a callable",
                     who, CRC_ISAL, CRC_LIBDEFLATE);
    return -1;
}

static void xor_range(sink_t *s, Py_ssize_t k0, Py_ssize_t k1)
{
    uint8_t *const data = s->data; /* in locals: the stores could alias the sink's fields */
    const int32_t *const offsets = s->offsets;
    const uint32_t *const words = s->words;
    for (Py_ssize_t i = k0; i < k1; i++)
        xor_word(data + offsets[i + 1], words[i]);
}

int kp_rows_ok(sink_t *s, Py_ssize_t k0, Py_ssize_t k1, const kp_crc_t *crc)
{
    Py_ssize_t lo = s->offsets[k0], hi = s->offsets[k1];
    if (k0 == k1)
        return 1;
    if (hi > s->dcap - 4) {
        PyErr_SetString(PyExc_ValueError, "rows' CRC check: no room for the last CRC word");
        return -1;
    }
    memset(s->data + hi, 0, 4);
    xor_range(s, k0, k1);
    uint32_t check;
    int r = kp_crc(crc, s->data + lo, hi + 4 - lo, CHECK_OK, &check);
    xor_range(s, k0, k1);
    return r < 0 ? -1 : check == CHECK_OK;
}

/* check_rows(data, offsets, words, k0, k1, crc32) -> bool: kp_rows_ok on Python's buffers
 * (walk.check_words), with every end it reads checked: within the data with 4 bytes to spare,
 * in order. ValueError where they are not (a caller's bug). */
PyObject *kp_check_rows(PyObject *self, PyObject *args)
{
    Py_buffer data, offs, wbuf;
    Py_ssize_t k0, k1;
    PyObject *fn, *result = NULL;
    if (!PyArg_ParseTuple(args, "w*y*y*nnO", &data, &offs, &wbuf, &k0, &k1, &fn))
        return NULL;
    sink_t s = {0};
    kp_crc_t engine;
    s.data = (uint8_t *)data.buf;
    s.dcap = data.len;
    s.offsets = (int32_t *)offs.buf;
    s.ocap = offs.len / (Py_ssize_t)sizeof(int32_t);
    s.words = (uint32_t *)wbuf.buf;
    s.wcap = wbuf.len / (Py_ssize_t)sizeof(uint32_t);
    if (kp_crc_parse(fn, NULL, &engine, "check_rows") < 0)
        goto done;
    if (k0 < 0 || k1 < k0 || k1 + 1 > s.ocap || k1 > s.wcap) {
        PyErr_SetString(PyExc_ValueError, "check_rows: range out of bounds");
        goto done;
    }
    for (Py_ssize_t i = k0; i <= k1 && k1 > k0; i++) { /* no rows: nothing read */
        Py_ssize_t at = s.offsets[i];
        if (at < 0 || at > s.dcap - 4 || (i > k0 && at < s.offsets[i - 1])) {
            PyErr_Format(PyExc_ValueError, "check_rows: end %zd outside the data or out of order",
                         at);
            goto done;
        }
    }
    int ok = kp_rows_ok(&s, k0, k1, &engine);
    if (ok >= 0)
        result = PyBool_FromLong(ok);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&offs);
    PyBuffer_Release(&wbuf);
    return result;
}

/* snappy_fetch(buf, recs, data, offsets, words, counts, crc32, verify)
 *     -> (status, i, dpos, k)
 * For every snappy wrapper recs[i] of buf, in order: its CRC32 checked (when verify, by the
 * engine crc32: CRC_ISAL or a callable, kp_crc_parse), its payload decompressed and taken into
 * the sink at (dpos, k) as snappy_take does, counts[i] = the rows it held; the rows' CRCs
 * checked a CHECK_CHUNK at a time. Stops at the first wrapper i that is anything else (status ST_BAD_CRC, ST_BAD_SNAPPY
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
    kp_crc_t engine;
    if (kp_sink_parse(&s, &data, 0, &offs, &wbuf, 0) < 0 ||
        kp_crc_parse(fn, NULL, &engine, "snappy_fetch") < 0)
        goto done;
    if (cbuf.len / (Py_ssize_t)sizeof(int64_t) < n) {
        PyErr_SetString(PyExc_ValueError, "snappy_fetch: counts shorter than recs");
        goto done;
    }
    for (; i < n; i++) {
        const rec_t *r = &recs[i];
        int64_t size;
        const uint8_t *payload = wrapper_payload(r, CODEC_SNAPPY, p, buf.len, &size);
        if (!payload) {
            status = ST_BAD_SNAPPY;
            break;
        }
        uint32_t crc;
        if (verify && kp_crc(&engine, payload, size, 0, &crc) < 0)
            goto done;
        if (verify && crc != r->crc) {
            status = ST_BAD_CRC;
            break;
        }
        Py_ssize_t before = s.k;
        long long value;
        status = kp_take_snappy(payload, size, &s, &value);
        if (status != ST_END)
            break;
        counts[i] = s.k - before;
        if (verify && (s.dpos - s.offsets[checked] >= CHECK_CHUNK || i == n - 1)) {
            int ok = kp_rows_ok(&s, checked, s.k, &engine);
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

/* wrapped_rows(recs, counts, base, offset, next_offset, inner_index) -> rows
 * The per-row columns of a batch of wrappers (_messages/columns.py): row j of wrapper i gets its
 * wrapper's absolute offset base + start and next offset base + start + 4 + LENGTH, and its
 * index j inside it; counts[i] rows each, in order. ValueError if a count is negative or the
 * rows do not fit an output. */
PyObject *kp_wrapped_rows(PyObject *self, PyObject *args)
{
    Py_buffer recbuf, cbuf, obuf, nbuf, ibuf;
    long long base;
    if (!PyArg_ParseTuple(args, "y*y*Lw*w*w*", &recbuf, &cbuf, &base, &obuf, &nbuf, &ibuf))
        return NULL;
    PyObject *result = NULL;
    const rec_t *recs = (const rec_t *)recbuf.buf;
    const int64_t *counts = (const int64_t *)cbuf.buf;
    int64_t *offset = (int64_t *)obuf.buf, *next = (int64_t *)nbuf.buf;
    int32_t *inner = (int32_t *)ibuf.buf;
    Py_ssize_t n = recbuf.len / (Py_ssize_t)sizeof(rec_t);
    Py_ssize_t room = obuf.len / (Py_ssize_t)sizeof(int64_t), rows = 0;
    if (nbuf.len / (Py_ssize_t)sizeof(int64_t) < room)
        room = nbuf.len / (Py_ssize_t)sizeof(int64_t);
    if (ibuf.len / (Py_ssize_t)sizeof(int32_t) < room)
        room = ibuf.len / (Py_ssize_t)sizeof(int32_t);
    if (cbuf.len / (Py_ssize_t)sizeof(int64_t) < n) {
        PyErr_SetString(PyExc_ValueError, "wrapped_rows: counts shorter than recs");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t count = counts[i];
        if (count < 0 || count > room - rows || count > INT32_MAX) {
            PyErr_Format(PyExc_ValueError, "wrapped_rows: %lld rows of wrapper %zd do not fit",
                         (long long)count, i);
            goto done;
        }
        int64_t at = base + recs[i].start, after = at + LENGTH_SIZE + recs[i].length;
        for (int32_t j = 0; j < (int32_t)count; j++) {
            offset[rows + j] = at;
            next[rows + j] = after;
            inner[rows + j] = j;
        }
        rows += (Py_ssize_t)count;
    }
    result = PyLong_FromSsize_t(rows);
done:
    PyBuffer_Release(&recbuf);
    PyBuffer_Release(&cbuf);
    PyBuffer_Release(&obuf);
    PyBuffer_Release(&nbuf);
    PyBuffer_Release(&ibuf);
    return result;
}

/* --- one snappy wrapper, taken (the lane's step, and snappy_take for Python) ----------- */

/* Decompresses the wrapper payload p[0:n] into the sink's data at dpos and walks the message
 * set found there in place (kp_sink_take, compacting: payloads moved down to dpos, their ends
 * and CRC words recorded; the same statuses as kp_take). ST_END: it was whole plain messages;
 * any other status (ST_BAD_SNAPPY for the payload itself) leaves the sink partly written, for
 * the caller to decode on the general path. */
int kp_take_snappy(const uint8_t *p, Py_ssize_t n, sink_t *s, long long *value)
{
    *value = 0;
    Py_ssize_t written = kp_snappy_decompress(p, n, s->data + s->dpos, s->dcap - s->dpos);
    if (written < 0)
        return ST_BAD_SNAPPY;
    Py_ssize_t pos = s->dpos, end = s->dpos + written;
    return kp_sink_take(s->data, &pos, end, end, s, value, 1);
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
