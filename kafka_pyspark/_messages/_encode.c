/* Message sets from an Arrow value column, in one pass: the compiled twin of encode.py's
 * encode_message_sets_arrow (kafka_pyspark/_messages/encode.py, which checks the arguments and
 * calls `encode_sets` when this optional module is built; KAFKA_PYSPARK_PURE=1 takes the pure
 * path, which gives the same bytes for none and snappy and the same messages for gzip).
 *
 * For rows [cuts[0], cuts[k]) of a column given as its offsets (int64, n + 1) and data buffer:
 * each row becomes one message, LENGTH | MAGIC | [ATTRIBUTES 0] | CRC32 | payload (magic 1 or
 * 0), framed by _frame.c (the CRC-32s by its fold lanes where the CPU has them), its CRC32 also
 * stored in `crcs` (when given, in row order); set j (rows cuts[j] to cuts[j + 1]) is
 *   - codec none: its messages back to back, written straight into the output;
 *   - snappy: ONE magic-1 wrapper (ATTRIBUTES 2) whose payload is snappy-java's stream framing
 *     (8-byte magic 82 SNAPPY 00, int32 version 1, int32 compatible version 1, then per 32 KiB
 *     of input an int32 compressed length and one raw snappy block, _snapenc.c) of the framed
 *     messages;
 *   - gzip: ONE magic-1 wrapper (ATTRIBUTES 1) whose payload is one gzip member with Java's
 *     header (1f 8b 08 00, mtime 0, xfl 0, os ff), a raw deflate body by libdeflate at `level`,
 *     CRC32 and ISIZE little-endian;
 *   an empty set is zero bytes. Sets are written back to back into one output (a new bytes
 * object, or a buffer the caller gives: encode.py's reused ones, see output()); `ends`
 * (k + 1 int64) says where each one starts and ends, so Python hands out views of it (each set
 * is written once; the socket takes it from there).
 *
 * Nothing here trusts its arguments: offsets must not decrease and must lie in the data, cuts
 * must not decrease and lie in 0..n, a payload must fit one message; else ValueError (encode.py
 * checks the rest first; for these two it runs its own checks, and raises the typed errors,
 * only when this refuses). The work runs without the GIL. The layout constants come from
 * _kernel.h (exported, checked at load against walk.KERNEL_CONSTANTS as the other modules'
 * are), the zero-CRC table from _zeros.c (compiled into both); nothing else of _kernel's is
 * used.
 */
#include "_kernel.h" /* first: Python.h before the standard headers; the layout constants */

#include <libdeflate.h>

#include "_frame.h"
#include "_snapenc.h"

/* snappy-java's stream (compression.py, checked at load as SNAPPY_BLOCK_SIZE) */
#define SNAPPY_BLOCK_SIZE 32768
#define SNAPPY_JAVA_HEADER_SIZE 16
/* Java's gzip member around a deflate body (compression.py's GZIP_HEADER) */
#define GZIP_HEADER_SIZE 10
#define GZIP_TRAILER_SIZE 8

static const uint8_t SNAPPY_JAVA_HEADER[SNAPPY_JAVA_HEADER_SIZE] = {
    0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1};
static const uint8_t GZIP_HEADER[GZIP_HEADER_SIZE] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};

static inline void put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* crc_engine_at(address) -> bool: whether the function at address is a usable CRC-32
 * (kp_crc_fn_at); if so, it computes the CRCs _frame.c takes per payload from now on. */
static PyObject *crc_engine_at(PyObject *self, PyObject *arg)
{
    kp_crc32_fn fn;
    int ok = kp_crc_fn_at(arg, &fn);
    if (ok < 0)
        return NULL;
    if (ok)
        kp_frame_set_crc(fn);
    return PyBool_FromLong(ok);
}

typedef struct {
    kp_rows_t rows;      /* offsets (n + 1), data, magic, crcs (rows from cuts[0] on, or NULL) */
    const int64_t *cuts; /* k + 1, row indices */
    Py_ssize_t n, k;
    int codec, level;
} job_t;

static inline size_t inner_size(const job_t *j, Py_ssize_t lo, Py_ssize_t hi)
{
    const int64_t *offs = j->rows.offs;
    return (size_t)(offs[hi] - offs[lo]) + (size_t)(hi - lo) * kp_head_size(j->rows.magic);
}

/* snappy-java's stream of inner[0..n) into dst (room: snappy_room(n)); its size */
static size_t snappy_stream(const uint8_t *inner, size_t n, uint8_t *dst, uint16_t *table)
{
    memcpy(dst, SNAPPY_JAVA_HEADER, SNAPPY_JAVA_HEADER_SIZE);
    uint8_t *op = dst + SNAPPY_JAVA_HEADER_SIZE;
    for (size_t at = 0; at < n; at += SNAPPY_BLOCK_SIZE) {
        size_t len = n - at < SNAPPY_BLOCK_SIZE ? n - at : SNAPPY_BLOCK_SIZE;
        size_t block = kp_snappy_compress(inner + at, len, op + 4, table);
        kp_put_be32(op, (uint32_t)block);
        op += 4 + block;
    }
    return (size_t)(op - dst);
}

static size_t snappy_room(size_t n)
{
    size_t blocks = (n + SNAPPY_BLOCK_SIZE - 1) / SNAPPY_BLOCK_SIZE;
    return SNAPPY_JAVA_HEADER_SIZE + blocks * 4 + n + blocks * 32 + n / 6 + blocks;
}

/* one gzip member of inner[0..n) into dst (room: gzip_room); its size */
static size_t gzip_member(struct libdeflate_compressor *c, const uint8_t *inner, size_t n,
                          uint8_t *dst, size_t room)
{
    memcpy(dst, GZIP_HEADER, GZIP_HEADER_SIZE);
    size_t body = libdeflate_deflate_compress(c, inner, n, dst + GZIP_HEADER_SIZE,
                                              room - GZIP_HEADER_SIZE - GZIP_TRAILER_SIZE);
    uint8_t *t = dst + GZIP_HEADER_SIZE + body;
    put_le32(t, (uint32_t)libdeflate_crc32(0, inner, n));
    put_le32(t + 4, (uint32_t)n);
    return GZIP_HEADER_SIZE + body + GZIP_TRAILER_SIZE;
}

static size_t gzip_room(struct libdeflate_compressor *c, size_t n)
{
    return GZIP_HEADER_SIZE + libdeflate_deflate_compress_bound(c, n) + GZIP_TRAILER_SIZE;
}

static size_t wrapper_room(const job_t *j, struct libdeflate_compressor *c, size_t n)
{
    if (!n)
        return 0;
    return HEADER_V1_SIZE + (j->codec == CODEC_GZIP ? gzip_room(c, n) : snappy_room(n));
}

/* set lo..hi as one wrapper at dst, its inner messages framed in scratch; its size */
static size_t wrapped(const job_t *j, struct libdeflate_compressor *c, uint16_t *table,
                      Py_ssize_t lo, Py_ssize_t hi, uint8_t *scratch, uint8_t *dst)
{
    size_t n = kp_frame(&j->rows, lo, hi, scratch);
    if (!n)
        return 0;
    uint8_t *payload = dst + HEADER_V1_SIZE;
    size_t size = j->codec == CODEC_GZIP ? gzip_member(c, scratch, n, payload, gzip_room(c, n))
                                         : snappy_stream(scratch, n, payload, table);
    kp_header(dst, 1, j->codec, size, (uint32_t)libdeflate_crc32(0, payload, size));
    return HEADER_V1_SIZE + size;
}

/* every set into out; ends[0..k] where each starts and ends */
static void encode_all(const job_t *j, struct libdeflate_compressor *c, uint16_t *table,
                       uint8_t *scratch, uint8_t *out, int64_t *ends)
{
    size_t at = 0;
    ends[0] = 0;
    if (j->codec == CODEC_NONE) /* the sets back to back: all rows framed at once */
        kp_frame(&j->rows, j->cuts[0], j->cuts[j->k], out);
    for (Py_ssize_t s = 0; s < j->k; s++) {
        Py_ssize_t lo = j->cuts[s], hi = j->cuts[s + 1];
        at += j->codec == CODEC_NONE ? inner_size(j, lo, hi)
                                     : wrapped(j, c, table, lo, hi, scratch, out + at);
        ends[s + 1] = (int64_t)at;
    }
}

/* the argument checks (encode.py makes them first, with typed errors); -1: ValueError set */
static int check_job(const job_t *j, Py_ssize_t data_len, Py_ssize_t crcs_len)
{
    if (j->rows.magic != 0 && j->rows.magic != 1)
        return PyErr_Format(PyExc_ValueError, "magic must be 0 or 1"), -1;
    if (j->codec < CODEC_NONE || j->codec > CODEC_SNAPPY)
        return PyErr_Format(PyExc_ValueError, "unknown codec %d", j->codec), -1;
    if (j->codec == CODEC_GZIP && (j->level < 0 || j->level > 12))
        return PyErr_Format(PyExc_ValueError, "gzip level %d is not 0-12", j->level), -1;
    int64_t limit = MAX_MESSAGE_LENGTH - (int64_t)kp_head_size(j->rows.magic) + 4;
    const int64_t *offs = j->rows.offs;
    for (Py_ssize_t i = 0; i <= j->n; i++) {
        if (offs[i] < 0 || offs[i] > data_len || (i && offs[i] < offs[i - 1]))
            return PyErr_Format(PyExc_ValueError, "offset %zd out of order or range", i), -1;
        if (i && offs[i] - offs[i - 1] > limit)
            return PyErr_Format(PyExc_ValueError, "value %zd does not fit a message", i - 1), -1;
    }
    for (Py_ssize_t s = 0; s <= j->k; s++)
        if (j->cuts[s] < 0 || j->cuts[s] > j->n || (s && j->cuts[s] < j->cuts[s - 1]))
            return PyErr_Format(PyExc_ValueError, "cut %zd out of order or range", s), -1;
    if (crcs_len >= 0 && crcs_len != 4 * (j->cuts[j->k] - j->cuts[0]))
        return PyErr_Format(PyExc_ValueError, "crcs must hold one uint32 per row"), -1;
    return 0;
}

/* bytes all sets take at most; *most: the largest set's framed messages */
static size_t room_of(const job_t *j, struct libdeflate_compressor *c, size_t *most)
{
    *most = 0;
    if (j->codec == CODEC_NONE)
        return inner_size(j, j->cuts[0], j->cuts[j->k]);
    size_t total = 0;
    for (Py_ssize_t s = 0; s < j->k; s++) {
        size_t n = inner_size(j, j->cuts[s], j->cuts[s + 1]);
        if (n > *most)
            *most = n;
        total += wrapper_room(j, c, n);
    }
    return total;
}

typedef struct {
    Py_buffer offs, data, cuts, crcs, into;
} views_t;

static void release(views_t *v)
{
    PyBuffer_Release(&v->offs);
    PyBuffer_Release(&v->data);
    PyBuffer_Release(&v->cuts);
    PyBuffer_Release(&v->crcs);
    PyBuffer_Release(&v->into);
}

static int parse(PyObject *args, views_t *v, job_t *j, PyObject **into)
{
    PyObject *crcs;
    *into = Py_None;
    memset(v, 0, sizeof *v);
    if (!PyArg_ParseTuple(args, "y*y*y*iiiO|O:encode_sets", &v->offs, &v->data, &v->cuts,
                          &j->rows.magic, &j->codec, &j->level, &crcs, into))
        return -1;
    if (crcs != Py_None && PyObject_GetBuffer(crcs, &v->crcs, PyBUF_WRITABLE) < 0)
        return -1;
    if (v->offs.len < 8 || v->offs.len % 8 || v->cuts.len < 8 || v->cuts.len % 8)
        return PyErr_SetString(PyExc_ValueError, "offsets and cuts must be int64 arrays"), -1;
    j->rows.offs = (const int64_t *)v->offs.buf;
    j->rows.data = (const uint8_t *)v->data.buf;
    j->rows.data_len = (size_t)v->data.len;
    j->cuts = (const int64_t *)v->cuts.buf;
    j->n = v->offs.len / 8 - 1;
    j->k = v->cuts.len / 8 - 1;
    j->rows.crcs = crcs != Py_None ? (uint32_t *)v->crcs.buf : NULL;
    j->rows.crc_base = j->cuts[0];
    return check_job(j, v->data.len, crcs != Py_None ? v->crcs.len : -1);
}

/* the output: a new bytes object of `room` bytes (into None), or `into` (a writable buffer of at
 * least `room` bytes), or what `into(room)` returns (a callable: encode.py's pool of reused
 * buffers), its buffer in v->into */
static PyObject *output(PyObject *into, size_t room, views_t *v)
{
    if (into == Py_None)
        return PyBytes_FromStringAndSize(NULL, (Py_ssize_t)room);
    PyObject *out = PyCallable_Check(into) ? PyObject_CallFunction(into, "n", (Py_ssize_t)room)
                                           : Py_NewRef(into);
    if (!out || PyObject_GetBuffer(out, &v->into, PyBUF_WRITABLE) < 0) {
        Py_XDECREF(out);
        return NULL;
    }
    if ((size_t)v->into.len < room) {
        PyErr_Format(PyExc_ValueError, "into: %zu bytes, the sets need room for %zu",
                     (size_t)v->into.len, room);
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

/* encode_sets(offsets, data, cuts, magic, codec, level, crcs, into=None) -> (out, ends: int64
 * bytes): the sets written from the start of out (see output()), back to back */
static PyObject *encode_sets(PyObject *self, PyObject *args)
{
    views_t v;
    job_t j;
    PyObject *out = NULL, *ends = NULL, *result = NULL, *into;
    struct libdeflate_compressor *c = NULL;
    uint16_t *table = NULL;
    uint8_t *scratch = NULL;
    if (parse(args, &v, &j, &into) < 0)
        goto done;
    if (j.codec == CODEC_GZIP && !(c = libdeflate_alloc_compressor(j.level))) {
        PyErr_NoMemory();
        goto done;
    }
    size_t most, room = room_of(&j, c, &most);
    if (room > (size_t)PY_SSIZE_T_MAX) {
        PyErr_NoMemory();
        goto done;
    }
    if ((j.codec == CODEC_SNAPPY && !(table = PyMem_RawMalloc(KP_SNAPPY_TABLE_SIZE * 2))) ||
        (most && !(scratch = PyMem_RawMalloc(most)))) {
        PyErr_NoMemory();
        goto done;
    }
    out = output(into, room, &v);
    ends = PyBytes_FromStringAndSize(NULL, (j.k + 1) * 8);
    if (!out || !ends)
        goto done;
    int64_t *at = (int64_t *)PyBytes_AS_STRING(ends);
    uint8_t *dst = into != Py_None ? (uint8_t *)v.into.buf : (uint8_t *)PyBytes_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS
    encode_all(&j, c, table, scratch, dst, at);
    Py_END_ALLOW_THREADS
    if (into != Py_None || _PyBytes_Resize(&out, (Py_ssize_t)at[j.k]) == 0)
        result = Py_BuildValue("OO", out, ends);
done:
    release(&v);
    libdeflate_free_compressor(c);
    PyMem_RawFree(table);
    PyMem_RawFree(scratch);
    Py_XDECREF(out);
    Py_XDECREF(ends);
    return result;
}

/* deflate_sets(data, ends, level) -> bytes out: each data[ends[i]:ends[i + 1]] deflated by
 * libdeflate at `level` into one reused buffer, nothing else (the benchmark's bare limit) */
static PyObject *deflate_sets(PyObject *self, PyObject *args)
{
    Py_buffer data, ends;
    int level;
    if (!PyArg_ParseTuple(args, "y*y*i:deflate_sets", &data, &ends, &level))
        return NULL;
    PyObject *result = NULL;
    struct libdeflate_compressor *c = NULL;
    uint8_t *buf = NULL;
    const int64_t *e = (const int64_t *)ends.buf;
    Py_ssize_t k = ends.len / 8 - 1, total = 0, most = 0;
    for (Py_ssize_t i = 0; i < k; i++) {
        if (e[i] < 0 || e[i + 1] < e[i] || e[i + 1] > data.len) {
            PyErr_SetString(PyExc_ValueError, "ends out of order or range");
            goto done;
        }
        most = e[i + 1] - e[i] > most ? e[i + 1] - e[i] : most;
    }
    if (level < 0 || level > 12 || !(c = libdeflate_alloc_compressor(level))) {
        PyErr_SetString(PyExc_ValueError, "level must be 0-12");
        goto done;
    }
    size_t room = libdeflate_deflate_compress_bound(c, (size_t)most);
    if (!(buf = PyMem_RawMalloc(room))) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < k; i++)
        total += (Py_ssize_t)libdeflate_deflate_compress(
            c, (const uint8_t *)data.buf + e[i], (size_t)(e[i + 1] - e[i]), buf, room);
    Py_END_ALLOW_THREADS
    result = PyLong_FromSsize_t(total);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&ends);
    libdeflate_free_compressor(c);
    PyMem_RawFree(buf);
    return result;
}

/* frame_lanes(on: int) -> bool: the CRC lanes on (1, where the CPU has them) or off (0; -1: as
 * they are); whether they are on (the tests and the benchmark run both engines) */
static PyObject *frame_lanes(PyObject *self, PyObject *arg)
{
    long on = PyLong_AsLong(arg);
    if (on == -1 && PyErr_Occurred())
        return NULL;
    return PyBool_FromLong(kp_frame_lanes(on < 0 ? -1 : on != 0));
}

static PyMethodDef methods[] = {
    {"frame_lanes", frame_lanes, METH_O,
     "frame_lanes(on) -> bool: CRC lanes on (1), off (0) or as they are (-1); whether on"},
    {"encode_sets", encode_sets, METH_VARARGS,
     "encode_sets(offsets, data, cuts, magic, codec, level, crcs, into=None) -> (sets, ends)"},
    {"crc_engine_at", crc_engine_at, METH_O,
     "crc_engine_at(address) -> bool: use the CRC-32 function at address if it is zlib's"},
    {"deflate_sets", deflate_sets, METH_VARARGS,
     "deflate_sets(data, ends, level) -> compressed bytes in all (a benchmark's limit)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_encode",
                                    "Message sets from Arrow value columns (encode.py).", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__encode(void)
{
    kp_zeros_init();
    kp_frame_init();
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    if (kp_add_constants(m) < 0 ||
        PyModule_AddIntConstant(m, "SNAPPY_BLOCK_SIZE", SNAPPY_BLOCK_SIZE) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
