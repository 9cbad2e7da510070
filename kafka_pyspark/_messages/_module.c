/* The module _kernel: its method table, the capsule _gzip.c reaches it by, its init. The one
 * file of the module that uses all the others (_kernel.c: the walk, scan, take, gather and the
 * zero-CRC tables; _snappy.c: the snappy decoder; _wrappers.c: the snappy lane, the CRC engines
 * and the rows' check); none of them uses it.
 */
#include "_kernel.h"

static PyMethodDef methods[] = {
    {"scan", kp_scan_py, METH_VARARGS, "Walk and check the messages of a buffer into records."},
    {"gather", kp_gather_py, METH_VARARGS, "Copy uncompressed payloads; their ends and CRC words."},
    {"check_rows", kp_check_rows, METH_VARARGS, "Whether payloads match their CRC words."},
    {"take", kp_take_py, METH_VARARGS, "Walk plain messages, copying payloads: scan + gather."},
    {"snappy_size", kp_snappy_size, METH_O, "Bytes a snappy-java wrapper payload announces."},
    {"snappy_total", kp_snappy_total, METH_VARARGS, "Bytes snappy wrappers announce, together."},
    {"snappy_take", kp_snappy_take, METH_VARARGS, "Decompress a snappy wrapper in place, take."},
    {"snappy_fetch", kp_snappy_fetch, METH_VARARGS, "Check, decompress and take snappy wrappers."},
    {"crc_engine_at", kp_crc_engine_at, METH_O, "Use ISA-L's CRC-32 at this address (CRC_ISAL)."},
    {"wrapped_rows", kp_wrapped_rows, METH_VARARGS, "Per-row columns of a set of wrappers."},
    {"snappy_raw", kp_snappy_raw, METH_VARARGS, "Decompress one raw snappy block."},
    {"zeros_crc", kp_zeros_crc_py, METH_O, "CRC-32 of n zero bytes."},
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
    kp_zeros_init();
    kp_snappy_init();
    static const kp_capi_t capi = {KP_CAPI_VERSION, sizeof(rec_t), sizeof(sink_t),
                                   sizeof(kp_crc_t), kp_take, kp_sink_parse, kp_crc_parse,
                                   kp_rows_ok};
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    PyObject *capsule = PyCapsule_New((void *)&capi, KP_CAPI_NAME, NULL);
    if (kp_add_constants(m) < 0 || !capsule || PyModule_AddObject(m, "_C_API", capsule) < 0) {
        Py_XDECREF(capsule);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
