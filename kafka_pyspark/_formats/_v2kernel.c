/* The record walk of Kafka record batches (magic 2), compiled.
 *
 * Layout (kafka_pyspark/_formats/batch_layout.py, docs/dev/PROTOCOL.md "Later on-disk formats"), each
 * record of a batch's records area (uncompressed, or decompressed by the caller):
 *
 *   varint length | int8 attributes | varlong timestampDelta | varint offsetDelta |
 *   varint keyLength (-1 null) | key | varint valueLength (-1 null) | value |
 *   varint headerCount | headers: varint keyLength | key | varint valueLength (-1 null) | value
 *
 * Varints are zigzag base-128 groups: a varint (int32) has at most 5 bytes and its raw value
 * fits 32 bits; a varlong (int64) at most 10 bytes and 64 bits. Anything else is malformed.
 *
 * Three functions, on buffers (buffer protocol; no numpy C API):
 *
 *   walk(buf, starts, ends, counts, out, cap)
 *       -> (n, status, what, value, piece, record)
 *       walks the `counts[k]` records of every piece `buf[starts[k]:ends[k]]` (int64 arrays),
 *       checking every length and varint against the record's and the piece's end, and writes
 *       FIELDS int64 rows of `cap` entries into `out` (field f of record i at out[f * cap + i]),
 *       stopping at the first problem: `status` (ST_*), `what` (W_*: the field at fault),
 *       `value` (the offending length or byte count), `piece` and `record` (index in the
 *       piece) say where. `n` records were written before it.
 *   headers(buf, out, cap, n, hout, hcap) -> total
 *       the key and value positions of every header of the `n` walked records, as four int64
 *       rows of `hcap` entries in `hout` (key position, key length, value position, value
 *       length, -1 for null); it checks everything again and raises ValueError where the
 *       records do not match `buf` (a caller's bug, never bad data: walk() checked that).
 *
 *   gather(buf, pos, len, n, data, offsets) -> total
 *       copies the slices buf[pos[i]:pos[i] + len[i]] (a negative len: none) one after
 *       another into `data` and writes their int32 end positions to offsets[1:]: the buffers
 *       of an Arrow binary column (the value or key column) in one pass.
 *
 * Nothing reads outside `buf`: every varint is bounded by the record's end, every length is
 * compared with the bytes left before it is used, every write is checked against `cap`.
 * kafka_pyspark/_formats/records.py is the pure-Python twin; keep the two in step. Every
 * constant below that it states too (sizes, field rows, statuses, the fields at fault) is
 * exported by add_constants and checked at load against records.KERNEL_CONSTANTS: a build that
 * differs is not used (kafka_pyspark/_shared/native.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MIN_RECORD 6 /* attributes + five one-byte varints */
#define VARINT_MAX 5
#define VARLONG_MAX 10

enum { F_END, F_TIMESTAMP, F_OFFSET, F_KEY_POS, F_KEY_LEN, F_VALUE_POS, F_VALUE_LEN,
       F_HEADERS_POS, F_HEADER_COUNT, FIELDS };
enum { H_KEY_POS, H_KEY_LEN, H_VALUE_POS, H_VALUE_LEN, HFIELDS };

enum {
    ST_OK = 0,
    ST_MALFORMED = 1, /* a varint longer than its width, or out of its range */
    ST_PAST = 2,      /* a varint or bytes run past the record's (the piece's) end */
    ST_NEGATIVE = 3,  /* a length or count below its minimum (value) */
    ST_LENGTH = 4,    /* a record length (value) below 6 or past the piece's end */
    ST_LEFT = 5,      /* value bytes of the record left after its fields */
    ST_TRAILING = 6   /* value bytes of the piece left after its records */
};

enum { W_LENGTH, W_TIMESTAMP, W_OFFSET, W_KEY_LENGTH, W_KEY, W_VALUE_LENGTH, W_VALUE,
       W_HEADER_COUNT, W_HEADER_KEY_LENGTH, W_HEADER_KEY, W_HEADER_VALUE_LENGTH,
       W_HEADER_VALUE, W_RECORD };

/* The zigzag varint at p[*at] of at most `width` bytes, not reaching `end`: 0 and *at moved
 * past it, or ST_MALFORMED / ST_PAST. */
static inline int varint(const uint8_t *p, Py_ssize_t *at, Py_ssize_t end, int width,
                         int64_t *out)
{
    Py_ssize_t i = *at;
    if (i < end && p[i] < 0x80) { /* the common one-byte case */
        *out = (int64_t)(p[i] >> 1) ^ -(int64_t)(p[i] & 1);
        *at = i + 1;
        return ST_OK;
    }
    uint64_t raw = 0;
    for (int k = 0; k < width; k++, i++) {
        if (i >= end)
            return ST_PAST;
        uint8_t b = p[i];
        raw |= (uint64_t)(b & 0x7F) << (7 * k);
        if (b < 0x80) {
            /* the last byte may only carry the bits that fit: 4 of 32, 1 of 64 */
            if (k == width - 1 && (b >> (width == VARINT_MAX ? 4 : 1)))
                return ST_MALFORMED;
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            *at = i + 1;
            return ST_OK;
        }
    }
    return ST_MALFORMED;
}

typedef struct {
    int status, what;
    int64_t value;
} problem_t;

#define FAIL(st, w, v)                                                                        \
    do {                                                                                      \
        pr->status = (st);                                                                    \
        pr->what = (w);                                                                       \
        pr->value = (v);                                                                      \
        return 0;                                                                             \
    } while (0)

/* A length-prefixed byte string at *q (minimum length `least`: -1 allows null); its
 * position and length go to pos/len. 1 when fine, else 0 and *pr set. */
static inline int blob(const uint8_t *p, Py_ssize_t *q, Py_ssize_t rend, int64_t least,
                       int w_len, int64_t *pos, int64_t *len, problem_t *pr)
{
    int64_t n;
    int st = varint(p, q, rend, VARINT_MAX, &n);
    if (st)
        FAIL(st, w_len, 0);
    if (n < least)
        FAIL(ST_NEGATIVE, w_len, n);
    if (n > rend - *q)
        FAIL(ST_PAST, w_len + 1, n);
    *pos = *q;
    *len = n;
    if (n > 0)
        *q += (Py_ssize_t)n;
    return 1;
}

/* One record at *at of the piece ending at `end`: its fields in f[FIELDS], *at moved past it.
 * 1 when fine, else 0 and *pr set. */
static int record(const uint8_t *p, Py_ssize_t *at, Py_ssize_t end, int64_t *f, problem_t *pr)
{
    Py_ssize_t q = *at;
    int64_t length, ignored;
    int st = varint(p, &q, end, VARINT_MAX, &length);
    if (st)
        FAIL(st, W_LENGTH, 0);
    if (length < MIN_RECORD || length > end - q)
        FAIL(ST_LENGTH, W_LENGTH, length);
    Py_ssize_t rend = q + (Py_ssize_t)length;
    q += 1; /* attributes (unused) */
    if ((st = varint(p, &q, rend, VARLONG_MAX, &f[F_TIMESTAMP])))
        FAIL(st, W_TIMESTAMP, 0);
    if ((st = varint(p, &q, rend, VARINT_MAX, &f[F_OFFSET])))
        FAIL(st, W_OFFSET, 0);
    if (!blob(p, &q, rend, -1, W_KEY_LENGTH, &f[F_KEY_POS], &f[F_KEY_LEN], pr))
        return 0;
    if (!blob(p, &q, rend, -1, W_VALUE_LENGTH, &f[F_VALUE_POS], &f[F_VALUE_LEN], pr))
        return 0;
    int64_t count;
    if ((st = varint(p, &q, rend, VARINT_MAX, &count)))
        FAIL(st, W_HEADER_COUNT, 0);
    if (count < 0)
        FAIL(ST_NEGATIVE, W_HEADER_COUNT, count);
    f[F_HEADERS_POS] = q;
    f[F_HEADER_COUNT] = count;
    /* every header takes at least 2 bytes or fails: the loop is bounded by the record */
    for (int64_t h = 0; h < count; h++) {
        if (!blob(p, &q, rend, 0, W_HEADER_KEY_LENGTH, &ignored, &ignored, pr))
            return 0;
        if (!blob(p, &q, rend, -1, W_HEADER_VALUE_LENGTH, &ignored, &ignored, pr))
            return 0;
    }
    if (q != rend)
        FAIL(ST_LEFT, W_RECORD, rend - q);
    f[F_END] = rend;
    *at = rend;
    return 1;
}

static int check_pieces(Py_buffer *buf, Py_buffer *starts, Py_buffer *ends, Py_buffer *counts,
                        Py_ssize_t *pieces)
{
    Py_ssize_t k = starts->len / (Py_ssize_t)sizeof(int64_t);
    if (ends->len != starts->len || counts->len != starts->len) {
        PyErr_SetString(PyExc_ValueError, "walk: starts, ends and counts differ in length");
        return 0;
    }
    const int64_t *s = starts->buf, *e = ends->buf, *c = counts->buf;
    for (Py_ssize_t i = 0; i < k; i++) {
        if (s[i] < 0 || e[i] < s[i] || e[i] > buf->len || c[i] < 0) {
            PyErr_Format(PyExc_ValueError, "walk: piece %zd out of range", i);
            return 0;
        }
    }
    *pieces = k;
    return 1;
}

static PyObject *walk(PyObject *self, PyObject *args)
{
    Py_buffer buf, starts, ends, counts, out;
    Py_ssize_t cap, pieces;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*n", &buf, &starts, &ends, &counts, &out, &cap))
        return NULL;
    PyObject *result = NULL;
    if (cap < 0 || cap > out.len / (Py_ssize_t)(FIELDS * sizeof(int64_t))) {
        PyErr_SetString(PyExc_ValueError, "walk: cap does not fit the output");
        goto done;
    }
    if (!check_pieces(&buf, &starts, &ends, &counts, &pieces))
        goto done;
    const uint8_t *p = buf.buf;
    const int64_t *s = starts.buf, *e = ends.buf, *c = counts.buf;
    int64_t *o = out.buf;
    problem_t pr = {ST_OK, 0, 0};
    Py_ssize_t n = 0, k = 0, r = 0;
    for (; k < pieces && !pr.status; k++) {
        Py_ssize_t at = (Py_ssize_t)s[k];
        for (r = 0; r < c[k]; r++) {
            int64_t f[FIELDS];
            if (!record(p, &at, (Py_ssize_t)e[k], f, &pr))
                break;
            if (n >= cap) {
                PyErr_Format(PyExc_ValueError, "walk: more than %zd records", cap);
                goto done;
            }
            for (int j = 0; j < FIELDS; j++)
                o[j * cap + n] = f[j];
            n++;
        }
        if (!pr.status && at != e[k]) {
            pr.status = ST_TRAILING;
            pr.what = W_RECORD;
            pr.value = e[k] - at;
        }
    }
    if (pr.status)
        k--;
    else
        r = 0; /* as the Python twin: (pieces, 0) when all is well */
    result = Py_BuildValue("(niiLnn)", n, pr.status, pr.what, (long long)pr.value, k, r);
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    PyBuffer_Release(&counts);
    PyBuffer_Release(&out);
    return result;
}

static PyObject *headers(PyObject *self, PyObject *args)
{
    Py_buffer buf, out, hout;
    Py_ssize_t cap, n, hcap;
    if (!PyArg_ParseTuple(args, "y*y*nnw*n", &buf, &out, &cap, &n, &hout, &hcap))
        return NULL;
    PyObject *result = NULL;
    if (cap < 0 || n < 0 || n > cap || cap > out.len / (Py_ssize_t)(FIELDS * sizeof(int64_t)) ||
        hcap < 0 || hcap > hout.len / (Py_ssize_t)(HFIELDS * sizeof(int64_t))) {
        PyErr_SetString(PyExc_ValueError, "headers: sizes do not fit the buffers");
        goto done;
    }
    const uint8_t *p = buf.buf;
    const int64_t *o = out.buf;
    int64_t *h = hout.buf;
    Py_ssize_t total = 0;
    problem_t unused; /* the walk already named any problem: a mismatch here is a ValueError */
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t count = o[F_HEADER_COUNT * cap + i], rend = o[F_END * cap + i];
        Py_ssize_t q = (Py_ssize_t)o[F_HEADERS_POS * cap + i];
        if (count < 0 || q < 0 || rend < q || rend > buf.len || count > hcap - total) {
            PyErr_Format(PyExc_ValueError, "headers: record %zd does not fit", i);
            goto done;
        }
        for (int64_t j = 0; j < count; j++, total++) {
            if (!blob(p, &q, (Py_ssize_t)rend, 0, W_HEADER_KEY_LENGTH,
                      &h[H_KEY_POS * hcap + total], &h[H_KEY_LEN * hcap + total], &unused) ||
                !blob(p, &q, (Py_ssize_t)rend, -1, W_HEADER_VALUE_LENGTH,
                      &h[H_VALUE_POS * hcap + total], &h[H_VALUE_LEN * hcap + total], &unused)) {
                PyErr_Format(PyExc_ValueError, "headers: record %zd does not match", i);
                goto done;
            }
        }
    }
    result = PyLong_FromSsize_t(total);
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&out);
    PyBuffer_Release(&hout);
    return result;
}

/* gather(buf, pos, len, n, data, offsets) -> total: buf[pos[i]:pos[i] + max(len[i], 0)] for
 * i < n, one after another into `data`, their int32 end positions into offsets[1:n + 1]
 * (offsets[0] = 0): an Arrow binary column's buffers. ValueError where a slice is outside
 * `buf` or the output does not fit (int32 offsets included). */
static PyObject *gather(PyObject *self, PyObject *args)
{
    Py_buffer buf, pos, len, data, offs;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "y*y*y*nw*w*", &buf, &pos, &len, &n, &data, &offs))
        return NULL;
    PyObject *result = NULL;
    if (n < 0 || pos.len / (Py_ssize_t)sizeof(int64_t) < n ||
        len.len / (Py_ssize_t)sizeof(int64_t) < n ||
        offs.len / (Py_ssize_t)sizeof(int32_t) < n + 1) {
        PyErr_SetString(PyExc_ValueError, "gather: sizes do not fit the buffers");
        goto done;
    }
    const uint8_t *p = buf.buf;
    const int64_t *at = pos.buf, *size = len.buf;
    uint8_t *d = data.buf;
    int32_t *o = offs.buf;
    int64_t total = 0, limit = data.len < INT32_MAX ? data.len : INT32_MAX;
    o[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t a = at[i], l = size[i] > 0 ? size[i] : 0;
        if (a < 0 || a > buf.len || l > buf.len - a || l > limit - total) {
            PyErr_Format(PyExc_ValueError, "gather: slice %zd does not fit", i);
            goto done;
        }
        memcpy(d + total, p + a, (size_t)l);
        total += l;
        o[i + 1] = (int32_t)total;
    }
    result = PyLong_FromLongLong((long long)total);
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&pos);
    PyBuffer_Release(&len);
    PyBuffer_Release(&data);
    PyBuffer_Release(&offs);
    return result;
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, "Walk and check the records of record-batch pieces."},
    {"headers", headers, METH_VARARGS, "Key and value positions of the walked records' headers."},
    {"gather", gather, METH_VARARGS, "Copy slices of a buffer into an Arrow binary column."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_v2kernel",
    .m_doc = "Compiled record walk of the Kafka record-batch (magic 2) decoder.",
    .m_size = -1,
    .m_methods = methods,
};

#define C(name) {#name, name}
static int add_constants(PyObject *m)
{
    const struct {
        const char *name;
        long value;
    } c[] = {
        C(MIN_RECORD), C(VARINT_MAX), C(VARLONG_MAX),
        C(F_END), C(F_TIMESTAMP), C(F_OFFSET), C(F_KEY_POS), C(F_KEY_LEN), C(F_VALUE_POS),
        C(F_VALUE_LEN), C(F_HEADERS_POS), C(F_HEADER_COUNT), C(FIELDS),
        C(H_KEY_POS), C(H_KEY_LEN), C(H_VALUE_POS), C(H_VALUE_LEN), C(HFIELDS),
        C(ST_OK), C(ST_MALFORMED), C(ST_PAST), C(ST_NEGATIVE), C(ST_LENGTH), C(ST_LEFT),
        C(ST_TRAILING),
        C(W_LENGTH), C(W_TIMESTAMP), C(W_OFFSET), C(W_KEY_LENGTH), C(W_KEY), C(W_VALUE_LENGTH),
        C(W_VALUE), C(W_HEADER_COUNT), C(W_HEADER_KEY_LENGTH), C(W_HEADER_KEY),
        C(W_HEADER_VALUE_LENGTH), C(W_HEADER_VALUE), C(W_RECORD),
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        if (PyModule_AddIntConstant(m, c[i].name, c[i].value) < 0)
            return -1;
    return 0;
}
#undef C

PyMODINIT_FUNC PyInit__v2kernel(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m && add_constants(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
