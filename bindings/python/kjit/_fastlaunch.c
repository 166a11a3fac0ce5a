/*
 * kjit._fastlaunch: the optional compiled launch path of the Python binding.
 *
 * One launch is one call here: the grid, block, stream, dynamic shared memory and the
 * kernel arguments are converted into a kjit_launch_config and the kernel's packed
 * parameter buffer (laid out by kjit_kernel_param_info), and kjit_kernel_launch_packed is
 * called through the function pointer the binding found with ctypes, so that the very
 * library ctypes loaded is used and this module links nothing but Python.
 *
 * kjit.Kernel derives from this module's KernelBase, which holds its handle and Launcher
 * in C fields; its __call__ is kernel_call (make_call()), also the vectorcall of its
 * instances (use_vectorcall()), so kernel(grid, block, args) runs no Python frame and
 * builds no argument tuple or keyword dict before the launch; its launch_packed is
 * kernel_launch_packed likewise. Launcher.launch / launch_packed serve the Python
 * methods (Kernel.launch, and the fallbacks _call_python / _launch_packed_python).
 *
 * The rule that keeps both paths identical: this module converts only the values it is
 * sure of and returns None for anything else (another type, a value out of range, a
 * count that does not match, an exception from an argument's attribute). The Python
 * code then does the whole launch the ctypes way, which raises its usual errors with
 * their usual messages. Nothing is launched before every value has been converted.
 *
 * Python's full C API is used (not the limited API): the module is compiled from source
 * for the interpreter that runs it, and the limited API would turn the tuple, float and
 * buffer accessors into function calls on the hot path for no gain.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* kjit_launch_config of include/kjit/kernel.h (LP64). */
typedef struct {
  uint32_t struct_size;
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_bytes;
  void *stream;
  uint32_t cluster[3];
  int cooperative;
} launch_config;

_Static_assert(sizeof(launch_config) == 56, "kjit_launch_config is 56 bytes on LP64");

/* kjit_kernel_launch_packed */
typedef int (*launch_fn)(void *kernel, const launch_config *cfg, const void *buffer,
                         size_t size);

/* DLPack (dlpack.h): only what a device pointer needs. */
typedef struct {
  void *data;
  int32_t device_type;
  int32_t device_id;
  int32_t ndim;
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
  int64_t *shape;
  int64_t *strides;
  uint64_t byte_offset;
} dl_tensor;

typedef struct {
  uint32_t major;
  uint32_t minor;
  void *manager_ctx;
  void *deleter;
  uint64_t flags;
  dl_tensor tensor;
} dl_managed_tensor_versioned;

/* Argument kinds, decided once per type by kjit._kernel._fast_kind (same numbers). */
enum {
  KIND_OTHER = 0, /* the Python path decides (and raises) */
  KIND_INT = 1,
  KIND_FLOAT = 2,
  KIND_SCALAR = 3, /* kjit.int32(...) etc.: the bytes in ._raw */
  KIND_BUFFER = 4, /* bytes, bytearray, ctypes values, NumPy scalars: the buffer */
  KIND_TORCH = 5,  /* .is_cuda and .data_ptr() */
  KIND_CUPY = 6,   /* .data.ptr */
  KIND_CAI = 7,    /* __cuda_array_interface__['data'][0] */
  KIND_DLPACK = 8, /* __dlpack__() */
  KIND_NP_INT = 9, /* NumPy integer scalars: operator.index(), itemsize in bits 8.. */
  KIND_NP_FLOAT = 10, /* NumPy float32 / float64 scalars: float(), itemsize likewise */
  KIND_NP_VALUE = 11, /* NumPy scalars whose value follows the object header (checked by
                         value_in_head() for the type): copied from there, itemsize likewise */
  KIND_LIMIT
};

#define STACK_BUFFER 4096
#define KIND_CACHE_LIMIT 1024

/* Set once by setup(). */
static PyObject *kind_of_type;  /* callable: type -> kind */
static PyObject *stream_handle; /* kjit._arrays.stream_handle */
static PyObject *check_status;  /* kjit._util.check: raises for a status */
static PyObject *kinds;         /* dict: type -> kind */
static unsigned long kinds_generation; /* bumped by setup(): cached kinds are stale */

/* A Launcher's memory of the last argument type at one parameter and its kind, so that
 * launches with the same types as the last one need no dict lookup. */
typedef struct {
  PyObject *type; /* strong reference (the Launcher is tracked by the GC), or NULL */
  int kind;
  unsigned long generation;
} kind_cache;

static PyObject *str_raw, *str_is_cuda, *str_data_ptr, *str_data, *str_ptr, *str_cai,
    *str_dlpack, *str_mask, *str_cuda_stream_proto, *str_stream_attrs[3], *str_h,
    *str_launcher, *str_call_python, *str_buffer, *str_launch_packed_python, *str_args,
    *str_stream, *str_shared_mem, *str_cluster,
    *str_cooperative;

/* ---- small conversions: 0 = done, -1 = not ours (the Python path decides) -------------- */

static int get_optional_attr(PyObject *o, PyObject *name, PyObject **out) {
#if PY_VERSION_HEX >= 0x030D0000
  return PyObject_GetOptionalAttr(o, name, out);
#else
  return _PyObject_LookupAttr(o, name, out);
#endif
}

/* An exact int in [0, 2**64 - 1]. */
static int u64_of(PyObject *v, uint64_t *out) {
  if (!PyLong_CheckExact(v)) return -1;
  unsigned long long u = PyLong_AsUnsignedLongLong(v);
  if (u == (unsigned long long)-1 && PyErr_Occurred()) {
    PyErr_Clear();
    return -1;
  }
  *out = u;
  return 0;
}

/* An exact int in [1, 2**32 - 1], as the launch dimensions need. */
static int dim_of(PyObject *v, uint32_t *out) {
  if (!PyLong_CheckExact(v)) return -1;
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
  if (overflow || x < 1 || x > (long long)UINT32_MAX) return -1;
  *out = (uint32_t)x;
  return 0;
}

/* grid / block: an int or a tuple or list of 1 to 3 ints. */
static int dims_of(PyObject *v, uint32_t out[3]) {
  out[0] = out[1] = out[2] = 1;
  if (PyLong_CheckExact(v)) return dim_of(v, &out[0]);
  PyObject *const *items;
  Py_ssize_t n;
  if (PyTuple_CheckExact(v)) {
    items = &PyTuple_GET_ITEM(v, 0);
    n = PyTuple_GET_SIZE(v);
  } else if (PyList_CheckExact(v)) {
    items = &PyList_GET_ITEM(v, 0);
    n = PyList_GET_SIZE(v);
  } else {
    return -1;
  }
  if (n < 1 || n > 3) return -1;
  for (Py_ssize_t i = 0; i < n; i++)
    if (dim_of(items[i], &out[i]) < 0) return -1;
  return 0;
}

/* An int into a 1, 2, 4 or 8-byte parameter: range [-2**(8n-1), 2**(8n) - 1], two's
 * complement, little-endian (as the Python path's struct formats). */
static int pack_int(PyObject *v, char *dst, size_t size) {
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
  if (x == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return -1;
  }
  uint64_t bits;
  if (overflow > 0 && size == 8) {
    unsigned long long u = PyLong_AsUnsignedLongLong(v);
    if (u == (unsigned long long)-1 && PyErr_Occurred()) {
      PyErr_Clear();
      return -1;
    }
    bits = u;
  } else if (overflow) {
    return -1;
  } else if (size == 8) {
    bits = (uint64_t)x;
  } else if (size == 1 || size == 2 || size == 4) {
    long long lo = -(1LL << (8 * size - 1)), hi = (1LL << (8 * size)) - 1;
    if (x < lo || x > hi) return -1;
    bits = (uint64_t)x;
  } else {
    return -1;
  }
  memcpy(dst, &bits, size); /* little-endian: the low `size` bytes */
  return 0;
}

static int pack_float(PyObject *v, char *dst, size_t size) {
  double d = PyFloat_AS_DOUBLE(v);
  if (size == 8) {
    memcpy(dst, &d, 8);
    return 0;
  }
  if (size != 4) return -1;
  float f = (float)d;
  if (isinf(f) && !isinf(d)) return -1; /* too large for a float: the Python path says so */
  memcpy(dst, &f, 4);
  return 0;
}

static int pack_bytes_of(PyObject *v, char *dst, size_t size) {
  if (PyBytes_CheckExact(v)) {
    if ((size_t)PyBytes_GET_SIZE(v) != size) return -1;
    memcpy(dst, PyBytes_AS_STRING(v), size);
    return 0;
  }
  Py_buffer view;
  if (PyObject_GetBuffer(v, &view, PyBUF_SIMPLE) < 0) {
    PyErr_Clear();
    return -1;
  }
  int r = -1;
  if ((size_t)view.len == size) {
    memcpy(dst, view.buf, size);
    r = 0;
  }
  PyBuffer_Release(&view);
  return r;
}

static int pack_scalar(PyObject *v, char *dst, size_t size) {
  PyObject *raw = PyObject_GetAttr(v, str_raw);
  if (raw == NULL) {
    PyErr_Clear();
    return -1;
  }
  int r = PyBytes_CheckExact(raw) ? pack_bytes_of(raw, dst, size) : -1;
  Py_DECREF(raw);
  return r;
}

/* A device pointer from an attribute's value: an exact int, or None / 0 for null. */
static int pointer_from(PyObject *p, uint64_t *out) {
  if (p == Py_None) {
    *out = 0;
    return 0;
  }
  return u64_of(p, out);
}

static int torch_pointer(PyObject *v, uint64_t *out) {
  PyObject *is_cuda = PyObject_GetAttr(v, str_is_cuda);
  if (is_cuda == NULL) {
    PyErr_Clear();
    return -1;
  }
  int cuda = is_cuda == Py_True;
  Py_DECREF(is_cuda);
  if (!cuda) return -1; /* a CPU tensor: the Python path raises */
  PyObject *p = PyObject_CallMethodObjArgs(v, str_data_ptr, NULL);
  if (p == NULL) {
    PyErr_Clear();
    return -1;
  }
  int r = u64_of(p, out);
  Py_DECREF(p);
  return r;
}

static int cupy_pointer(PyObject *v, uint64_t *out) {
  PyObject *data = PyObject_GetAttr(v, str_data);
  if (data == NULL) {
    PyErr_Clear();
    return -1;
  }
  PyObject *p = PyObject_GetAttr(data, str_ptr);
  Py_DECREF(data);
  if (p == NULL) {
    PyErr_Clear();
    return -1;
  }
  int r = u64_of(p, out);
  Py_DECREF(p);
  return r;
}

static int cai_pointer(PyObject *v, uint64_t *out) {
  PyObject *cai = PyObject_GetAttr(v, str_cai);
  if (cai == NULL) {
    PyErr_Clear();
    return -1;
  }
  int r = -1;
  if (PyDict_Check(cai)) {
    PyObject *mask = PyDict_GetItemWithError(cai, str_mask);     /* borrowed */
    PyObject *data = PyDict_GetItemWithError(cai, str_data);     /* borrowed */
    if (PyErr_Occurred()) {
      PyErr_Clear();
    } else if ((mask == NULL || mask == Py_None) && data != NULL && PyTuple_CheckExact(data) &&
               PyTuple_GET_SIZE(data) >= 1) {
      r = pointer_from(PyTuple_GET_ITEM(data, 0), out);
    }
  }
  Py_DECREF(cai);
  return r;
}

static int dlpack_pointer(PyObject *v, uint64_t *out) {
  PyObject *capsule = PyObject_CallMethodObjArgs(v, str_dlpack, NULL);
  if (capsule == NULL) {
    PyErr_Clear();
    return -1;
  }
  const dl_tensor *t = NULL;
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    t = (const dl_tensor *)PyCapsule_GetPointer(capsule, "dltensor");
  } else if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    const dl_managed_tensor_versioned *m =
        (const dl_managed_tensor_versioned *)PyCapsule_GetPointer(capsule, "dltensor_versioned");
    t = &m->tensor;
  }
  int r = -1;
  /* CUDA, CUDA host (pinned) and CUDA managed memory; one lane. */
  if (t != NULL && (t->device_type == 2 || t->device_type == 3 || t->device_type == 13) &&
      t->lanes == 1) {
    uint64_t base = (uint64_t)(uintptr_t)t->data;
    if (base + t->byte_offset >= base) {
      *out = base + t->byte_offset;
      r = 0;
    }
  }
  Py_DECREF(capsule); /* its destructor calls the producer's deleter */
  return r;
}

static int kind_of(PyObject *v) {
  PyObject *tp = (PyObject *)Py_TYPE(v);
  PyObject *k = PyDict_GetItemWithError(kinds, tp); /* borrowed */
  if (k == NULL) {
    if (PyErr_Occurred()) return -1;
    k = PyObject_CallFunctionObjArgs(kind_of_type, tp, NULL);
    if (k == NULL) return -1;
    if (PyDict_GET_SIZE(kinds) >= KIND_CACHE_LIMIT) PyDict_Clear(kinds);
    int r = PyDict_SetItem(kinds, tp, k);
    Py_DECREF(k); /* the dict holds it */
    if (r < 0) return -1;
  }
  long kind = PyLong_AsLong(k);
  return kind > 0 && (kind & 0xff) < KIND_LIMIT && kind < (1L << 16) ? (int)kind : KIND_OTHER;
}

/* A NumPy scalar of `itemsize` bytes: its value, which always fits its own size. The
 * bytes are those of tobytes(); a NaN keeps its exact bits through the buffer. */
static int pack_numpy(PyObject *v, int kind, char *dst, size_t size) {
  if ((size_t)(kind >> 8) != size) return -1;
  if ((kind & 0xff) == KIND_NP_INT) {
    PyObject *i = PyNumber_Index(v);
    if (i == NULL) {
      PyErr_Clear();
      return -1;
    }
    int r = pack_int(i, dst, size);
    Py_DECREF(i);
    return r;
  }
  double d = PyFloat_AsDouble(v);
  if (d == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    return -1;
  }
  if (isnan(d)) return pack_bytes_of(v, dst, size);
  if (size == 8) {
    memcpy(dst, &d, 8);
  } else {
    float f = (float)d; /* exact: d came from this float */
    memcpy(dst, &f, 4);
  }
  return 0;
}

/* Where a NumPy scalar keeps its value: right after the object header, as NumPy's
 * Py<Type>ScalarObject structs (PyArrayScalar_VAL) lay it out. */
static const char *value_after_head(PyObject *v) { return (const char *)v + sizeof(PyObject); }

/* value_in_head(obj, expected): whether obj's type is large enough to hold len(expected)
 * bytes after the object header and they are those bytes. kjit._kernel asks it of probe
 * instances of a NumPy scalar type before giving the type KIND_NP_VALUE. */
static PyObject *value_in_head(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
  (void)module;
  if (nargs != 2 || !PyBytes_CheckExact(args[1])) {
    PyErr_SetString(PyExc_TypeError, "value_in_head(obj, expected: bytes)");
    return NULL;
  }
  Py_ssize_t n = PyBytes_GET_SIZE(args[1]);
  PyTypeObject *tp = Py_TYPE(args[0]);
  if (n < 1 || tp->tp_itemsize != 0 || tp->tp_basicsize < (Py_ssize_t)sizeof(PyObject) + n)
    Py_RETURN_FALSE;
  return PyBool_FromLong(memcmp(value_after_head(args[0]), PyBytes_AS_STRING(args[1]),
                                (size_t)n) == 0);
}

/* One argument into its `size` bytes at `dst`; `cache` remembers its type's kind. */
static int pack_arg(PyObject *v, char *dst, size_t size, kind_cache *cache) {
  if (PyLong_CheckExact(v)) return pack_int(v, dst, size);
  if (PyFloat_CheckExact(v)) return pack_float(v, dst, size);
  PyObject *tp = (PyObject *)Py_TYPE(v);
  int kind;
  if (cache->type == tp && cache->generation == kinds_generation) {
    kind = cache->kind;
  } else {
    kind = kind_of(v);
    if (kind < 0) {
      PyErr_Clear();
      return -1;
    }
    Py_INCREF(tp);
    Py_XSETREF(cache->type, tp);
    cache->kind = kind;
    cache->generation = kinds_generation;
  }
  uint64_t p = 0;
  int r;
  switch (kind & 0xff) {
    case KIND_INT: return pack_int(v, dst, size);
    case KIND_SCALAR: return pack_scalar(v, dst, size);
    case KIND_BUFFER: return pack_bytes_of(v, dst, size);
    case KIND_TORCH: r = size == 8 ? torch_pointer(v, &p) : -1; break;
    case KIND_CUPY: r = size == 8 ? cupy_pointer(v, &p) : -1; break;
    case KIND_CAI: r = size == 8 ? cai_pointer(v, &p) : -1; break;
    case KIND_DLPACK: r = size == 8 ? dlpack_pointer(v, &p) : -1; break;
    case KIND_NP_INT:
    case KIND_NP_FLOAT: return pack_numpy(v, kind, dst, size);
    case KIND_NP_VALUE:
      if ((size_t)(kind >> 8) != size) return -1;
      memcpy(dst, value_after_head(v), size);
      return 0;
    default: return -1;
  }
  if (r == 0) memcpy(dst, &p, 8);
  return r;
}

/* ---- streams ---------------------------------------------------------------------------- */

/* The stream as kjit._arrays.stream_handle() gives it: None, an int, or an object with
 * __cuda_stream__, .cuda_stream, .ptr or .handle. The common forms are read here;
 * anything else goes through stream_handle() itself. 0 = done, -1 = error raised (the
 * same error the Python path raises: every check before this one has passed). */
static int stream_of(PyObject *s, uint64_t *out) {
  if (s == Py_None) {
    *out = 0;
    return 0;
  }
  if (u64_of(s, out) == 0) return 0;
  if (!PyLong_Check(s)) { /* ints out of range and int subclasses: stream_handle() */
    PyObject *v = NULL;
    int found = get_optional_attr(s, str_cuda_stream_proto, &v);
    if (found > 0) {
      PyObject *h = v;
      if (PyCallable_Check(v)) {
        h = PyObject_CallObject(v, NULL);
        Py_DECREF(v);
        if (h == NULL) PyErr_Clear();
      }
      int r = -1;
      if (h != NULL && PyTuple_CheckExact(h) && PyTuple_GET_SIZE(h) == 2)
        r = u64_of(PyTuple_GET_ITEM(h, 1), out);
      Py_XDECREF(h);
      if (r == 0) return 0;
    } else if (found == 0) {
      for (int i = 0; i < 3; i++) {
        if (get_optional_attr(s, str_stream_attrs[i], &v) < 0) break;
        if (v == NULL) continue;
        int r = v == Py_None ? 1 : u64_of(v, out);
        Py_DECREF(v);
        if (r == 0) return 0;
        if (r < 0) break;
      }
    }
    PyErr_Clear();
  }
  PyObject *h = PyObject_CallFunctionObjArgs(stream_handle, s, NULL);
  if (h == NULL) return -1;
  int r = u64_of(h, out);
  Py_DECREF(h);
  if (r < 0) PyErr_SetString(PyExc_SystemError, "kjit: stream_handle() gave no handle");
  return r;
}

/* ---- the launcher ----------------------------------------------------------------------- */

typedef struct {
  PyObject_HEAD
  launch_fn launch;
  size_t nparams;
  size_t bufsize;
  size_t *offsets; /* nparams offsets, then nparams sizes */
  kind_cache *kinds; /* nparams */
} Launcher;

static int launcher_traverse(Launcher *self, visitproc visit, void *arg) {
  for (size_t i = 0; self->kinds != NULL && i < self->nparams; i++)
    Py_VISIT(self->kinds[i].type);
  return 0;
}

static int launcher_clear(Launcher *self) {
  for (size_t i = 0; self->kinds != NULL && i < self->nparams; i++)
    Py_CLEAR(self->kinds[i].type);
  return 0;
}

static void launcher_dealloc(Launcher *self) {
  PyObject_GC_UnTrack(self);
  launcher_clear(self);
  PyMem_Free(self->kinds);
  PyMem_Free(self->offsets);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static int size_of(PyObject *v, size_t *out) {
  size_t n = PyLong_AsSize_t(v);
  if (n == (size_t)-1 && PyErr_Occurred()) return -1;
  *out = n;
  return 0;
}

/* Launcher(launch_address, params, bufsize): params is a sequence of (offset, size). */
static PyObject *launcher_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
  PyObject *address, *params, *bufsize;
  static char *names[] = {"launch", "params", "bufsize", NULL};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO:Launcher", names, &address, &params,
                                   &bufsize))
    return NULL;
  PyObject *seq = PySequence_Fast(params, "params must be a sequence of (offset, size)");
  if (seq == NULL) return NULL;
  Launcher *self = (Launcher *)type->tp_alloc(type, 0);
  if (self == NULL) goto fail;
  self->launch = (launch_fn)PyLong_AsVoidPtr(address);
  if (self->launch == NULL) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "launch must not be NULL");
    goto fail;
  }
  if (size_of(bufsize, &self->bufsize) < 0) goto fail;
  self->nparams = (size_t)PySequence_Fast_GET_SIZE(seq);
  self->offsets = PyMem_Calloc(2 * self->nparams + 1, sizeof(size_t));
  self->kinds = PyMem_Calloc(self->nparams + 1, sizeof(kind_cache));
  if (self->offsets == NULL || self->kinds == NULL) {
    PyErr_NoMemory();
    goto fail;
  }
  size_t end = 0;
  for (size_t i = 0; i < self->nparams; i++) {
    size_t off, size;
    PyObject *p = PySequence_Fast_GET_ITEM(seq, i);
    if (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) != 2) {
      PyErr_SetString(PyExc_TypeError, "params must be a sequence of (offset, size)");
      goto fail;
    }
    if (size_of(PyTuple_GET_ITEM(p, 0), &off) < 0 || size_of(PyTuple_GET_ITEM(p, 1), &size) < 0)
      goto fail;
    /* As the Python path: parameters in order, none overlapping, inside the buffer. */
    if (off < end || off > self->bufsize || size > self->bufsize - off) {
      PyErr_SetString(PyExc_ValueError, "parameters overlap or lie outside the buffer");
      goto fail;
    }
    end = off + size;
    self->offsets[i] = off;
    self->offsets[self->nparams + i] = size;
  }
  Py_DECREF(seq);
  return (PyObject *)self;
fail:
  Py_DECREF(seq);
  Py_XDECREF(self);
  return NULL;
}

/* The launch configuration from grid, block, stream and shared_mem (NULL: 0).
 * 0 = done, 1 = not ours, -1 = error raised. */
static int config_of(PyObject *grid, PyObject *block, PyObject *stream_obj, PyObject *shared_obj,
                     launch_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
  if (dims_of(grid, cfg->grid) < 0 || dims_of(block, cfg->block) < 0) return 1;
  uint64_t shared = 0;
  if (shared_obj != NULL && (u64_of(shared_obj, &shared) < 0 || shared > UINT32_MAX)) return 1;
  cfg->shared_bytes = (uint32_t)shared;
  uint64_t stream;
  if (stream_of(stream_obj, &stream) < 0) return -1;
  cfg->stream = (void *)(uintptr_t)stream;
  return 0;
}

/* Whether another Python thread exists in this interpreter (one that could wait for the
 * GIL). The thread list is read without its lock: a thread state being added this very
 * moment (a C thread's first PyGILState_Ensure) may be missed, and that thread then
 * waits for this one launch, as for any C call that keeps the GIL. */
static int other_threads(void) {
  PyThreadState *me = PyThreadState_Get();
#if PY_VERSION_HEX < 0x03090000
  PyThreadState *t = PyInterpreterState_ThreadHead(me->interp);
#else
  PyThreadState *t = PyInterpreterState_ThreadHead(PyThreadState_GetInterpreter(me));
#endif
  return t != me || PyThreadState_Next(t) != NULL;
}

/* The launch itself: kjit_kernel_launch_packed's status. */
static int call(Launcher *self, void *h, const launch_config *cfg, const void *buffer,
                size_t size) {
  launch_fn launch = self->launch;
  /* The launch takes microseconds, but may wait for room in the launch queue (as long as
   * the GPU takes to drain it): other threads run meanwhile, as with ctypes. With no
   * other thread, nobody waits for the GIL, and keeping it spares a release and a take
   * (a mutex and a condition variable, tens of nanoseconds a launch). */
  if (!other_threads()) return launch(h, cfg, buffer, size);
  int status;
  Py_BEGIN_ALLOW_THREADS
  status = launch(h, cfg, buffer, size);
  Py_END_ALLOW_THREADS
  return status;
}

/* The kernel handle (an int) as the C pointer. 0 = done, -1 = error raised. */
static int handle_of(PyObject *handle, void **out) {
  *out = PyLong_AsVoidPtr(handle);
  return *out == NULL && PyErr_Occurred() ? -1 : 0;
}

#define LAUNCH_ARGS "(handle, grid, block, args, stream, shared_mem)"

/* One launch of `values` (the kernel arguments) with grid, block, stream and shared
 * (NULL: 0). 0 = launched (*status set), 1 = not ours (the Python path must do this
 * launch), -1 = error raised. */
static int launch_values(Launcher *self, void *h, PyObject *grid, PyObject *block,
                         PyObject *values, PyObject *stream, PyObject *shared, int *status) {
  PyObject *owned = NULL;
  if (PyList_CheckExact(values)) { /* a copy: converting an item may run Python code */
    values = owned = PyList_AsTuple(values);
    if (values == NULL) return -1;
  } else if (!PyTuple_CheckExact(values)) {
    return 1;
  }
  int r = 1;
  char stack[STACK_BUFFER];
  char *buf = stack;
  size_t n = self->nparams;
  if ((size_t)PyTuple_GET_SIZE(values) != n) goto done;
  if (self->bufsize > sizeof stack) {
    buf = PyMem_Malloc(self->bufsize);
    if (buf == NULL) {
      PyErr_NoMemory();
      r = -1;
      goto done;
    }
  }
  memset(buf, 0, self->bufsize);
  for (size_t i = 0; i < n; i++) {
    if (pack_arg(PyTuple_GET_ITEM(values, i), buf + self->offsets[i],
                 self->offsets[n + i], &self->kinds[i]) < 0)
      goto done;
  }
  launch_config cfg;
  r = config_of(grid, block, stream, shared, &cfg);
  if (r == 0) *status = call(self, h, &cfg, buf, self->bufsize);
done:
  if (buf != stack) PyMem_Free(buf);
  Py_XDECREF(owned);
  return r;
}

/* launch(handle, grid, block, args, stream, shared_mem): the status of
 * kjit_kernel_launch_packed, or None when the Python path must do this launch. */
static PyObject *launcher_launch(Launcher *self, PyObject *const *args, Py_ssize_t nargs) {
  if (nargs != 6) {
    PyErr_SetString(PyExc_TypeError, "launch" LAUNCH_ARGS " takes 6 arguments");
    return NULL;
  }
  void *h;
  int status = 0;
  if (handle_of(args[0], &h) < 0) return NULL;
  int r = launch_values(self, h, args[1], args[2], args[3], args[4], args[5], &status);
  if (r < 0) return NULL;
  if (r > 0) Py_RETURN_NONE;
  return PyLong_FromLong(status);
}

/* launch_packed(handle, grid, block, buffer, stream, shared_mem): likewise, with a
 * parameter buffer packed already. */
static PyObject *launcher_launch_packed(Launcher *self, PyObject *const *args,
                                        Py_ssize_t nargs) {
  if (nargs != 6) {
    PyErr_SetString(PyExc_TypeError, "launch_packed" LAUNCH_ARGS " takes 6 arguments");
    return NULL;
  }
  PyObject *buffer = args[3];
  if (!PyBytes_CheckExact(buffer) || (size_t)PyBytes_GET_SIZE(buffer) != self->bufsize)
    Py_RETURN_NONE;
  void *h;
  if (handle_of(args[0], &h) < 0) return NULL;
  launch_config cfg;
  int r = config_of(args[1], args[2], args[4], args[5], &cfg);
  if (r < 0) return NULL;
  if (r > 0) Py_RETURN_NONE;
  return PyLong_FromLong(call(self, h, &cfg, PyBytes_AS_STRING(buffer), self->bufsize));
}

static PyMethodDef launcher_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))launcher_launch, METH_FASTCALL,
     "launch" LAUNCH_ARGS " -> status, or None for the Python path"},
    {"launch_packed", (PyCFunction)(void (*)(void))launcher_launch_packed, METH_FASTCALL,
     "launch_packed(handle, grid, block, buffer, stream, shared_mem) -> status, or None"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LauncherType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kjit._fastlaunch.Launcher",
    .tp_basicsize = sizeof(Launcher),
    .tp_dealloc = (destructor)launcher_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)launcher_traverse,
    .tp_clear = (inquiry)launcher_clear,
    .tp_doc = "Launcher(launch_address, params, bufsize): launches of one kernel",
    .tp_methods = launcher_methods,
    .tp_new = launcher_new,
};

/* ---- Kernel.__call__ --------------------------------------------------------------------- */

#if PY_VERSION_HEX < 0x03090000
#define PyObject_Vectorcall _PyObject_Vectorcall
#define Py_TPFLAGS_HAVE_VECTORCALL _Py_TPFLAGS_HAVE_VECTORCALL
#endif

/* KernelBase: the C base of kjit.Kernel (when this module is in use). It holds what a
 * launch reads, the kernel handle (_h) and its Launcher (_launcher), in C fields rather
 * than the instance dict, and a vectorcall entry, so that kernel(grid, block, args,
 * stream=s) comes straight to kernel_call: no Python frame, no argument tuple and no
 * keyword dict. */
typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall; /* kernel_vectorcall, set by tp_new */
  PyObject *h;               /* _h: the handle (an int), or None / NULL once closed */
  PyObject *launcher;        /* _launcher: a Launcher, or None for the Python path */
} KernelBase;

static PyTypeObject KernelBaseType;
static PyObject *empty_tuple;

static PyObject *kernel_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames);

static PyObject *kernel_base_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
  (void)args;
  (void)kwargs;
  KernelBase *self = (KernelBase *)type->tp_alloc(type, 0);
  if (self != NULL) self->vectorcall = kernel_vectorcall;
  return (PyObject *)self;
}

static int kernel_base_traverse(KernelBase *self, visitproc visit, void *arg) {
  Py_VISIT(self->h);
  Py_VISIT(self->launcher);
  return 0;
}

static int kernel_base_clear(KernelBase *self) {
  Py_CLEAR(self->h);
  Py_CLEAR(self->launcher);
  return 0;
}

static void kernel_base_dealloc(KernelBase *self) {
  PyObject_GC_UnTrack(self);
  kernel_base_clear(self);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef kernel_base_members[] = {
    {"_h", T_OBJECT, offsetof(KernelBase, h), 0, "the kernel handle, None once closed"},
    {"_launcher", T_OBJECT, offsetof(KernelBase, launcher), 0,
     "the kernel's Launcher, None for the Python path"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject KernelBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kjit._fastlaunch.KernelBase",
    .tp_basicsize = sizeof(KernelBase),
    .tp_dealloc = (destructor)kernel_base_dealloc,
    .tp_vectorcall_offset = offsetof(KernelBase, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC |
                Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "The compiled part of kjit.Kernel: its handle, Launcher and call.",
    .tp_traverse = (traverseproc)kernel_base_traverse,
    .tp_clear = (inquiry)kernel_base_clear,
    .tp_members = kernel_base_members,
    .tp_new = kernel_base_new,
};

/* The kernel's handle and Launcher (new references; *launcher NULL when there is none),
 * from the C fields of a KernelBase, else from the attributes. -1 = error raised. */
static int kernel_state(PyObject *self, PyObject **h, PyObject **launcher) {
  if (PyObject_TypeCheck(self, &KernelBaseType)) {
    KernelBase *k = (KernelBase *)self;
    *h = k->h != NULL ? k->h : Py_None;
    Py_INCREF(*h);
    *launcher = k->launcher != NULL && Py_TYPE(k->launcher) == &LauncherType ? k->launcher : NULL;
    Py_XINCREF(*launcher);
    return 0;
  }
  *launcher = PyObject_GetAttr(self, str_launcher);
  if (*launcher == NULL) return -1;
  *h = PyObject_GetAttr(self, str_h);
  if (*h == NULL) {
    Py_CLEAR(*launcher);
    return -1;
  }
  if (Py_TYPE(*launcher) != &LauncherType) Py_CLEAR(*launcher);
  return 0;
}

/* The arguments of a usual launch call: (grid, block, third, *, stream=None,
 * shared_mem=0, cluster=None, cooperative=False), the third by position or by the name
 * `third_name`. */
typedef struct {
  PyObject *grid, *block;
  PyObject *third;  /* NULL when not given */
  PyObject *stream; /* Py_None when not given */
  PyObject *shared; /* NULL when not given (0) */
} call_args;

/* 1 = a usual call (c filled in), 0 = anything else: missing or repeated arguments,
 * other keywords, a cluster or a cooperative launch (the Python method decides). Keyword
 * names are interned by the compiler, so identity finds the usual ones. */
static int usual_call(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                      PyObject *third_name, call_args *c) {
  if (nargs < 2 || nargs > 3) return 0;
  c->grid = args[0];
  c->block = args[1];
  c->third = nargs == 3 ? args[2] : NULL;
  c->stream = Py_None;
  c->shared = NULL;
  Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t i = 0; i < nkw; i++) {
    PyObject *name = PyTuple_GET_ITEM(kwnames, i), *v = args[nargs + i];
    if (name == str_stream)
      c->stream = v;
    else if (name == str_shared_mem)
      c->shared = v;
    else if (name == third_name && c->third == NULL)
      c->third = v;
    else if (!((name == str_cluster && v == Py_None) ||
               (name == str_cooperative && v == Py_False)))
      return 0;
  }
  return 1;
}

/* What a launch returns: None for status 0, else the exception that _errors.check raises for it. */
static PyObject *launched(int status) {
  if (status == 0) Py_RETURN_NONE;
  PyObject *st = PyLong_FromLong(status);
  if (st == NULL) return NULL;
  PyObject *res = PyObject_CallFunctionObjArgs(check_status, st, NULL);
  Py_DECREF(st);
  return res; /* raises (NULL) */
}

/* self.<name>(*args, **kwargs): the Python method, which launches or raises. */
static PyObject *python_method(PyObject *self, PyObject *name, PyObject *const *args,
                               Py_ssize_t nargs, PyObject *kwnames) {
  PyObject *slow = PyObject_GetAttr(self, name);
  if (slow == NULL) return NULL;
  PyObject *result = PyObject_Vectorcall(slow, args, nargs, kwnames);
  Py_DECREF(slow);
  return result;
}

/* Kernel.__call__(grid, block, args=(), *, stream=None, shared_mem=0, cluster=None,
 * cooperative=False): the method of kjit.Kernel (make_call()) and the vectorcall of its
 * instances (kernel_vectorcall). It launches through the kernel's Launcher when it can;
 * otherwise, and for anything unusual in the call itself, it calls self._call_python
 * with the same arguments, which launches or raises. */
static PyObject *kernel_call(PyObject *self, PyObject *const *args, size_t nargsf,
                             PyObject *kwnames) {
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  call_args c;
  if (usual_call(args, nargs, kwnames, str_args, &c)) {
    PyObject *h, *launcher;
    if (kernel_state(self, &h, &launcher) < 0) return NULL;
    int r = 1, status = 0;
    void *ptr = NULL;
    if (launcher != NULL && h != Py_None) {
      r = handle_of(h, &ptr);
      if (r == 0)
        r = launch_values((Launcher *)launcher, ptr, c.grid, c.block,
                          c.third != NULL ? c.third : empty_tuple, c.stream, c.shared,
                          &status);
    }
    Py_DECREF(h);
    Py_XDECREF(launcher);
    if (r < 0) return NULL;
    if (r == 0) return launched(status);
  }
  return python_method(self, str_call_python, args, nargs, kwnames);
}

/* Kernel.launch_packed(grid, block, buffer, *, stream=None, shared_mem=0, cluster=None,
 * cooperative=False) likewise (make_launch_packed()): a bytes buffer of the kernel's size
 * is launched here, anything else goes to self._launch_packed_python. */
static PyObject *kernel_launch_packed(PyObject *self, PyObject *const *args, size_t nargsf,
                                      PyObject *kwnames) {
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  call_args c;
  if (usual_call(args, nargs, kwnames, str_buffer, &c) && c.third != NULL &&
      PyBytes_CheckExact(c.third)) {
    PyObject *h, *launcher;
    if (kernel_state(self, &h, &launcher) < 0) return NULL;
    int r = 1, status = 0;
    void *ptr = NULL;
    if (launcher != NULL && h != Py_None &&
        (size_t)PyBytes_GET_SIZE(c.third) == ((Launcher *)launcher)->bufsize) {
      launch_config cfg;
      r = handle_of(h, &ptr);
      if (r == 0) r = config_of(c.grid, c.block, c.stream, c.shared, &cfg);
      if (r == 0)
        status = call((Launcher *)launcher, ptr, &cfg, PyBytes_AS_STRING(c.third),
                      (size_t)PyBytes_GET_SIZE(c.third));
    }
    Py_DECREF(h);
    Py_XDECREF(launcher);
    if (r < 0) return NULL;
    if (r == 0) return launched(status);
  }
  return python_method(self, str_launch_packed_python, args, nargs, kwnames);
}

/* The vectorcall of KernelBase instances: `self` is the callable. */
static PyObject *kernel_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames) {
  return kernel_call(self, args, nargsf, kwnames);
}

static PyMethodDef kernel_call_def = {
    "__call__", (PyCFunction)(void (*)(void))kernel_call, METH_FASTCALL | METH_KEYWORDS,
    "__call__($self, grid, block, args=(), *, stream=None, shared_mem=0, cluster=None,\n"
    "         cooperative=False)\n--\n\n"
    "Launch asynchronously (see Kernel.launch): the compiled launch path."};

static PyMethodDef kernel_launch_packed_def = {
    "launch_packed", (PyCFunction)(void (*)(void))kernel_launch_packed,
    METH_FASTCALL | METH_KEYWORDS,
    "launch_packed($self, grid, block, buffer, *, stream=None, shared_mem=0, cluster=None,\n"
    "              cooperative=False)\n--\n\n"
    "Launch with a parameter buffer made by pack() (or by hand, laid out by params); its\n"
    "length must be param_buffer_size. The compiled launch path."};

static PyObject *method_for(PyObject *cls, PyMethodDef *def) {
  if (!PyType_Check(cls)) {
    PyErr_Format(PyExc_TypeError, "%s: takes a class", def->ml_name);
    return NULL;
  }
  return PyDescr_NewMethod((PyTypeObject *)cls, def);
}

/* make_call(cls): kernel_call as a method of the Python class `cls` (kjit.Kernel). */
static PyObject *make_call(PyObject *module, PyObject *cls) {
  (void)module;
  return method_for(cls, &kernel_call_def);
}

/* make_launch_packed(cls): kernel_launch_packed as a method of `cls` likewise. */
static PyObject *make_launch_packed(PyObject *module, PyObject *cls) {
  (void)module;
  return method_for(cls, &kernel_launch_packed_def);
}

/* use_vectorcall(cls): calls of instances of `cls`, a subclass of KernelBase whose
 * __call__ is make_call()'s, go to kernel_vectorcall directly. Setting __call__ in a
 * Python class makes its tp_call slot_tp_call, which builds an argument tuple and a
 * keyword dict and looks __call__ up on every call; and Python before 3.12 does not let
 * a Python subclass inherit its base's vectorcall. Both run the same kernel_call. Call it
 * after __call__ is set: a later assignment of __call__ would not be seen. */
static PyObject *use_vectorcall(PyObject *module, PyObject *cls) {
  (void)module;
  if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &KernelBaseType)) {
    PyErr_SetString(PyExc_TypeError, "use_vectorcall(cls) takes a subclass of KernelBase");
    return NULL;
  }
  PyTypeObject *tp = (PyTypeObject *)cls;
  PyObject *call = PyObject_GetAttrString(cls, "__call__");
  if (call == NULL) return NULL;
  int ours = Py_TYPE(call) == &PyMethodDescr_Type &&
             ((PyMethodDescrObject *)call)->d_method->ml_meth ==
                 (PyCFunction)(void (*)(void))kernel_call;
  Py_DECREF(call);
  if (!ours) Py_RETURN_FALSE; /* a __call__ of its own: slot_tp_call runs it */
  tp->tp_vectorcall_offset = offsetof(KernelBase, vectorcall);
  tp->tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL;
  PyType_Modified(tp);
  Py_RETURN_TRUE;
}

/* ---- module ---------------------------------------------------------------------------- */

/* setup(kind_of_type, stream_handle, check): the Python helpers this module defers to. */
static PyObject *setup(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
  (void)module;
  if (nargs != 3 || !PyCallable_Check(args[0]) || !PyCallable_Check(args[1]) ||
      !PyCallable_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError,
                    "setup(kind_of_type, stream_handle, check) takes 3 callables");
    return NULL;
  }
  Py_INCREF(args[2]);
  Py_XSETREF(check_status, args[2]);
  Py_INCREF(args[0]);
  Py_XSETREF(kind_of_type, args[0]);
  Py_INCREF(args[1]);
  Py_XSETREF(stream_handle, args[1]);
  PyDict_Clear(kinds);
  kinds_generation++;
  Py_RETURN_NONE;
}

static int noop_launch(void *kernel, const launch_config *cfg, const void *buffer,
                       size_t size) {
  (void)kernel;
  (void)cfg;
  (void)buffer;
  (void)size;
  return 0;
}

static PyMethodDef module_methods[] = {
    {"setup", (PyCFunction)(void (*)(void))setup, METH_FASTCALL,
     "setup(kind_of_type, stream_handle, check)"},
    {"value_in_head", (PyCFunction)(void (*)(void))value_in_head, METH_FASTCALL,
     "value_in_head(obj, expected): whether obj holds the bytes `expected` right after its "
     "object header"},
    {"make_call", make_call, METH_O, "make_call(cls): the compiled Kernel.__call__ for cls"},
    {"make_launch_packed", make_launch_packed, METH_O,
     "make_launch_packed(cls): the compiled Kernel.launch_packed for cls"},
    {"use_vectorcall", use_vectorcall, METH_O,
     "use_vectorcall(cls): instances of cls (a KernelBase) are called without slot_tp_call"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "kjit._fastlaunch",
    "kjit's compiled launch path (optional; the ctypes path does the same without it).", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

static int intern(PyObject **slot, const char *s) {
  *slot = PyUnicode_InternFromString(s);
  return *slot == NULL ? -1 : 0;
}

PyMODINIT_FUNC PyInit__fastlaunch(void) {
  if (intern(&str_raw, "_raw") < 0 || intern(&str_is_cuda, "is_cuda") < 0 ||
      intern(&str_data_ptr, "data_ptr") < 0 || intern(&str_data, "data") < 0 ||
      intern(&str_ptr, "ptr") < 0 || intern(&str_cai, "__cuda_array_interface__") < 0 ||
      intern(&str_dlpack, "__dlpack__") < 0 || intern(&str_mask, "mask") < 0 ||
      intern(&str_cuda_stream_proto, "__cuda_stream__") < 0 ||
      intern(&str_stream_attrs[0], "cuda_stream") < 0 ||
      intern(&str_stream_attrs[1], "ptr") < 0 || intern(&str_stream_attrs[2], "handle") < 0 ||
      intern(&str_h, "_h") < 0 || intern(&str_launcher, "_launcher") < 0 ||
      intern(&str_call_python, "_call_python") < 0 || intern(&str_buffer, "buffer") < 0 ||
      intern(&str_launch_packed_python, "_launch_packed_python") < 0 ||
      intern(&str_args, "args") < 0 ||
      intern(&str_stream, "stream") < 0 || intern(&str_shared_mem, "shared_mem") < 0 ||
      intern(&str_cluster, "cluster") < 0 || intern(&str_cooperative, "cooperative") < 0)
    return NULL;
  if (kinds == NULL && (kinds = PyDict_New()) == NULL) return NULL;
  if (empty_tuple == NULL && (empty_tuple = PyTuple_New(0)) == NULL) return NULL;
  if (PyType_Ready(&LauncherType) < 0 || PyType_Ready(&KernelBaseType) < 0) return NULL;
  PyObject *m = PyModule_Create(&module_def);
  if (m == NULL) return NULL;
  Py_INCREF(&LauncherType);
  if (PyModule_AddObject(m, "Launcher", (PyObject *)&LauncherType) < 0) {
    Py_DECREF(&LauncherType);
    Py_DECREF(m);
    return NULL;
  }
  Py_INCREF(&KernelBaseType);
  if (PyModule_AddObject(m, "KernelBase", (PyObject *)&KernelBaseType) < 0) {
    Py_DECREF(&KernelBaseType);
    Py_DECREF(m);
    return NULL;
  }
  /* A launch function that does nothing: the binding's own cost, measured without a GPU
   * (bench/python_bench.py) and its launches tested without one. */
  if (PyModule_AddObject(m, "NOOP_LAUNCH", PyLong_FromVoidPtr((void *)noop_launch)) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
