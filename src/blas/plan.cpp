#include "blas/plan.h"

#include <cctype>
#include <cstddef>
#include <cstring>
#include <limits>
#include <sstream>

#include "util/error.h"
#include "util/sha256.h"
#include "util/wire.h"

namespace kjit::blas {
namespace {

constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();

[[noreturn]] void invalid(const std::string& m) {
  fail(KJIT_ERROR_INVALID_ARGUMENT, m);
}
[[noreturn]] void unsupported(const std::string& m) {
  fail(KJIT_ERROR_UNSUPPORTED, m);
}

bool is_half(int32_t t) {
  return t == KJIT_GEMM_F16 || t == KJIT_GEMM_BF16;
}

std::string hex_ptr(const void* p) {
  std::ostringstream s;
  s << "0x" << std::hex << reinterpret_cast<uintptr_t>(p);
  return s.str();
}

void check_enum(int32_t v, int32_t lo, int32_t hi, const char* field) {
  if (v < lo || v > hi)
    invalid(std::string("desc->") + field + ": unknown value " + std::to_string(v));
}

void check_dim(int64_t v, const char* field) {
  if (v < 1)
    invalid(std::string("desc->") + field + " must be >= 1 (got " + std::to_string(v) + ")");
  if (v > kMaxDim)
    invalid(std::string("desc->") + field + " is too large (" + std::to_string(v) +
            " > 2147483647)");
}

// a * b + c with overflow detection (all non-negative).
bool mul_add(int64_t a, int64_t b, int64_t c, int64_t* out) {
  int64_t t = 0;
  if (__builtin_mul_overflow(a, b, &t)) return false;
  return !__builtin_add_overflow(t, c, out);
}

// One stored matrix in the caller's order: checks/defaults ld and stride, returns them.
struct Stored {
  int64_t ld = 0, stride = 0;
};

Stored check_matrix(char name, bool row_major, int64_t rows, int64_t cols, int64_t ld,
                    int64_t stride, int64_t batch, size_t elem, bool output) {
  // Field names are built only for messages: this runs on every kjit_gemm_run().
  const auto ldf = [name] { return std::string("desc->ld") + name; };
  const auto stf = [name] { return std::string("desc->stride_") + name; };
  const auto upper = [name] { return std::string(1, char(std::toupper(name))); };
  const int64_t contiguous = row_major ? cols : rows;  // elements of one stored column/row
  const int64_t other = row_major ? rows : cols;
  if (ld < 0) invalid(ldf() + " must be >= 0 (got " + std::to_string(ld) + ")");
  if (ld == 0) ld = contiguous;
  if (ld < contiguous)
    invalid(ldf() + " (" + std::to_string(ld) + ") must be >= " + std::to_string(contiguous) +
            ": " + upper() + " is stored " + std::to_string(rows) + " x " + std::to_string(cols) +
            (row_major ? " row-major" : " column-major"));
  int64_t one = 0;
  if (!mul_add(ld, other, 0, &one)) invalid(ldf() + " times the matrix extent overflows");
  if (batch > 1) {
    if (stride < 0) invalid(stf() + " must be >= 0 (got " + std::to_string(stride) + ")");
    if (stride == 0) stride = one;
    if (output && stride < one)
      invalid(stf() + " (" + std::to_string(stride) + ") must be >= " + std::to_string(one) +
              " (ld" + std::string(1, name) + " x " + std::to_string(other) +
              ") so that the D matrices of the batch do not overlap");
  } else {
    stride = 0;
  }
  int64_t span = 0, bytes = 0;
  if (!mul_add(batch - 1, stride, one, &span) ||
      __builtin_mul_overflow(span, int64_t(elem), &bytes))
    invalid("sizes of " + upper() + " overflow");
  return {ld, stride};
}

void check_aligned(const void* p, size_t align, const char* what, const char* type_name) {
  if (reinterpret_cast<uintptr_t>(p) % align != 0)
    invalid(std::string(what) + " (" + hex_ptr(p) + ") is misaligned: " + type_name + " needs " +
            std::to_string(align) + "-byte alignment");
}

void check_types(int32_t a, int32_t b, int32_t c, int32_t d, int32_t compute) {
  const bool fp8 = is_fp8(a) || is_fp8(b);
  // Suffix for messages only (built on failure: this runs on every kjit_gemm_run()).
  struct Types {
    int32_t a, b, c, d;
    operator std::string() const {
      return std::string(" (A/B/C/D = ") + dtype_name(a) + "/" + dtype_name(b) + "/" +
             dtype_name(c) + "/" + dtype_name(d) + ")";
    }
  } const abcd{a, b, c, d};
  if (fp8) {
    if (!is_fp8(a) || !is_fp8(b))
      unsupported(std::string("mixed fp8 and non-fp8 inputs are not supported") +
                  std::string(abcd));
    if (a == KJIT_GEMM_F8_E5M2 && b == KJIT_GEMM_F8_E5M2)
      unsupported(
          "fp8 GEMM with both A and B E5M2 is not supported (cuBLASLt needs at least "
          "one E4M3 input)" +
          std::string(abcd));
    if (compute != KJIT_GEMM_COMPUTE_F32)
      unsupported(std::string("fp8 GEMM needs compute F32 (got ") + compute_name(compute) + ")");
    if (c == KJIT_GEMM_F32) {
      if (d != KJIT_GEMM_F32) unsupported("fp8 GEMM with f32 C needs f32 D" + std::string(abcd));
    } else if (is_half(c)) {
      if (d != c && !is_fp8(d))
        unsupported("fp8 GEMM with " + std::string(dtype_name(c)) +
                    " C needs D of the same type "
                    "or fp8" +
                    std::string(abcd));
    } else {
      unsupported("fp8 GEMM needs C of type bf16, f16 or f32" + std::string(abcd));
    }
    return;
  }
  if (a != b)
    unsupported(std::string("A is ") + dtype_name(a) + " but B is " + dtype_name(b) +
                ": mixed input types are supported only for fp8");
  if (is_fp8(c) || is_fp8(d)) unsupported("fp8 C or D needs fp8 A and B" + std::string(abcd));
  if (c != d)
    unsupported(std::string("C is ") + dtype_name(c) + " but D is " + dtype_name(d) +
                ": they must match unless D is fp8");
  const auto bad_compute = [&](const char* needs) {
    unsupported(std::string("compute ") + compute_name(compute) + " with " + dtype_name(a) +
                " inputs is not supported: " + needs);
  };
  switch (a) {
    case KJIT_GEMM_F64:
      if (d != KJIT_GEMM_F64) unsupported("f64 inputs need f64 C and D" + std::string(abcd));
      if (compute != KJIT_GEMM_COMPUTE_F64) bad_compute("f64 needs compute F64");
      break;
    case KJIT_GEMM_F32:
      if (d != KJIT_GEMM_F32) unsupported("f32 inputs need f32 C and D" + std::string(abcd));
      if (compute != KJIT_GEMM_COMPUTE_F32 && compute != KJIT_GEMM_COMPUTE_TF32 &&
          compute != KJIT_GEMM_COMPUTE_F32_FAST_F16 && compute != KJIT_GEMM_COMPUTE_F32_FAST_BF16)
        bad_compute("f32 takes F32, TF32, F32_FAST_F16 or F32_FAST_BF16");
      break;
    case KJIT_GEMM_F16:
      if (d != KJIT_GEMM_F16 && d != KJIT_GEMM_F32)
        unsupported("f16 inputs need f16 or f32 C and D" + std::string(abcd));
      if (compute == KJIT_GEMM_COMPUTE_F16) {
        if (d != KJIT_GEMM_F16) bad_compute("compute F16 needs f16 C and D");
      } else if (compute != KJIT_GEMM_COMPUTE_F32) {
        bad_compute("f16 takes F32 or F16");
      }
      break;
    case KJIT_GEMM_BF16:
      if (d != KJIT_GEMM_BF16 && d != KJIT_GEMM_F32)
        unsupported("bf16 inputs need bf16 or f32 C and D" + std::string(abcd));
      if (compute != KJIT_GEMM_COMPUTE_F32) bad_compute("bf16 takes F32");
      break;
    default:
      break;
  }
}

}  // namespace

bool is_fp8(int32_t t) {
  return t == KJIT_GEMM_F8_E4M3 || t == KJIT_GEMM_F8_E5M2;
}

size_t dtype_size(int32_t t) {
  switch (t) {
    case KJIT_GEMM_F32:
      return 4;
    case KJIT_GEMM_F16:
    case KJIT_GEMM_BF16:
      return 2;
    case KJIT_GEMM_F8_E4M3:
    case KJIT_GEMM_F8_E5M2:
      return 1;
    case KJIT_GEMM_F64:
      return 8;
    default:
      return 0;
  }
}

const char* dtype_name(int32_t t) {
  switch (t) {
    case KJIT_GEMM_F32:
      return "f32";
    case KJIT_GEMM_F16:
      return "f16";
    case KJIT_GEMM_BF16:
      return "bf16";
    case KJIT_GEMM_F8_E4M3:
      return "e4m3";
    case KJIT_GEMM_F8_E5M2:
      return "e5m2";
    case KJIT_GEMM_F64:
      return "f64";
    default:
      return "?";
  }
}

const char* compute_name(int32_t c) {
  switch (c) {
    case KJIT_GEMM_COMPUTE_F32:
      return "F32";
    case KJIT_GEMM_COMPUTE_TF32:
      return "TF32";
    case KJIT_GEMM_COMPUTE_F16:
      return "F16";
    case KJIT_GEMM_COMPUTE_F64:
      return "F64";
    case KJIT_GEMM_COMPUTE_F32_FAST_F16:
      return "F32_FAST_F16";
    case KJIT_GEMM_COMPUTE_F32_FAST_BF16:
      return "F32_FAST_BF16";
    default:
      return "?";
  }
}

const char* epilogue_name(int32_t e) {
  switch (e) {
    case KJIT_GEMM_EPILOGUE_NONE:
      return "none";
    case KJIT_GEMM_EPILOGUE_BIAS:
      return "bias";
    case KJIT_GEMM_EPILOGUE_RELU:
      return "relu";
    case KJIT_GEMM_EPILOGUE_RELU_BIAS:
      return "relu+bias";
    case KJIT_GEMM_EPILOGUE_GELU:
      return "gelu";
    case KJIT_GEMM_EPILOGUE_GELU_BIAS:
      return "gelu+bias";
    default:
      return "?";
  }
}

bool epilogue_has_bias(int32_t e) {
  return e == KJIT_GEMM_EPILOGUE_BIAS || e == KJIT_GEMM_EPILOGUE_RELU_BIAS ||
         e == KJIT_GEMM_EPILOGUE_GELU_BIAS;
}

namespace {

// The fields of a request that need no other field to be checked.
void check_fields(const kjit_gemm_desc& d) {
  check_enum(d.order, KJIT_GEMM_COL_MAJOR, KJIT_GEMM_ROW_MAJOR, "order");
  check_enum(d.trans_a, KJIT_GEMM_OP_N, KJIT_GEMM_OP_T, "trans_a");
  check_enum(d.trans_b, KJIT_GEMM_OP_N, KJIT_GEMM_OP_T, "trans_b");
  check_dim(d.m, "m");
  check_dim(d.n, "n");
  check_dim(d.k, "k");
  if (d.a_type == KJIT_GEMM_DTYPE_DEFAULT)
    invalid("desc->a_type must be set (KJIT_GEMM_F32, KJIT_GEMM_F16, KJIT_GEMM_BF16, ...)");
  check_enum(d.a_type, KJIT_GEMM_F32, KJIT_GEMM_F64, "a_type");
  check_enum(d.b_type, KJIT_GEMM_DTYPE_DEFAULT, KJIT_GEMM_F64, "b_type");
  check_enum(d.c_type, KJIT_GEMM_DTYPE_DEFAULT, KJIT_GEMM_F64, "c_type");
  check_enum(d.d_type, KJIT_GEMM_DTYPE_DEFAULT, KJIT_GEMM_F64, "d_type");
  check_enum(d.bias_type, KJIT_GEMM_DTYPE_DEFAULT, KJIT_GEMM_F64, "bias_type");
  check_enum(d.compute, KJIT_GEMM_COMPUTE_DEFAULT, KJIT_GEMM_COMPUTE_F32_FAST_BF16, "compute");
  check_enum(d.epilogue, KJIT_GEMM_EPILOGUE_NONE, KJIT_GEMM_EPILOGUE_GELU_BIAS, "epilogue");
  if (d.reserved0 != 0) invalid("desc->reserved0 must be 0");
}

// The types of a request with every default resolved.
struct Types {
  int32_t a = 0, b = 0, c = 0, d = 0, compute = 0;
  int32_t bias = 0;  // 0 when the epilogue has no bias
};

Types resolve_types(const kjit_gemm_desc& d) {
  Types t;
  t.a = d.a_type;
  t.b = d.b_type ? d.b_type : t.a;
  t.d = d.d_type;
  if (!t.d) {
    if (is_fp8(t.a) || is_fp8(t.b))
      invalid("desc->d_type must be set when A or B is fp8 (bf16, f16, f32 or fp8)");
    t.d = t.a;
  }
  t.c = d.c_type;
  if (!t.c) {
    if (is_fp8(t.d)) invalid("desc->c_type must be set when D is fp8 (bf16 or f16)");
    t.c = t.d;
  }
  t.compute = d.compute ? d.compute
                        : (t.a == KJIT_GEMM_F64 ? int32_t(KJIT_GEMM_COMPUTE_F64)
                                                : int32_t(KJIT_GEMM_COMPUTE_F32));
  check_types(t.a, t.b, t.c, t.d, t.compute);
  if (epilogue_has_bias(d.epilogue)) {
    t.bias = d.bias_type;
    if (!t.bias) {
      if (is_fp8(t.a))
        t.bias = is_half(t.c) ? t.c : int32_t(KJIT_GEMM_BF16);
      else
        t.bias = t.d;
    }
    if (is_fp8(t.bias))
      unsupported(std::string("bias_type ") + dtype_name(t.bias) +
                  " is not supported (bias "
                  "vectors are f16, bf16, f32 or f64)");
  }
  return t;
}

// How each matrix and the bias are laid out, checked against the sizes.
struct Layout {
  Stored a, b, c, d;
  int64_t stride_bias = 0;
};

Layout check_sizes(const kjit_gemm_desc& d, const Types& t) {
  if (d.batch_count < 1)
    invalid("desc->batch_count must be >= 1 (got " + std::to_string(d.batch_count) + ")");
  if (d.batch_count > kMaxDim)
    invalid("desc->batch_count is too large (" + std::to_string(d.batch_count) + ")");
  const bool row = d.order == KJIT_GEMM_ROW_MAJOR;
  const bool ta = d.trans_a == KJIT_GEMM_OP_T, tb = d.trans_b == KJIT_GEMM_OP_T;
  const int64_t batch = d.batch_count;
  Layout l;
  l.a = check_matrix('a', row, ta ? d.k : d.m, ta ? d.m : d.k, d.lda, d.stride_a, batch,
                     dtype_size(t.a), false);
  l.b = check_matrix('b', row, tb ? d.n : d.k, tb ? d.k : d.n, d.ldb, d.stride_b, batch,
                     dtype_size(t.b), false);
  l.c = check_matrix('c', row, d.m, d.n, d.ldc, d.stride_c, batch, dtype_size(t.c), false);
  l.d = check_matrix('d', row, d.m, d.n, d.ldd, d.stride_d, batch, dtype_size(t.d), true);
  if (t.bias && batch > 1) {
    if (d.stride_bias < 0)
      invalid("desc->stride_bias must be >= 0 (got " + std::to_string(d.stride_bias) + ")");
    l.stride_bias = d.stride_bias;
    int64_t span = 0;
    if (!mul_add(batch - 1, l.stride_bias, row ? d.n : d.m, &span))
      invalid("sizes of bias overflow");
  }
  return l;
}

// Checks the buffers. Returns the buffer cuBLASLt reads as C (D in some cases, below, and
// then *layout's C is D's).
const void* check_pointers(const kjit_gemm_desc& d, const Types& t, const void* A, const void* B,
                           const void* C, const void* D, const void* bias, Layout* layout) {
  if (!A) invalid("A is NULL");
  if (!B) invalid("B is NULL");
  if (!D) invalid("D is NULL");
  check_aligned(A, dtype_size(t.a), "A", dtype_name(t.a));
  check_aligned(B, dtype_size(t.b), "B", dtype_name(t.b));
  check_aligned(D, dtype_size(t.d), "D", dtype_name(t.d));
  if (!C) {
    if (d.beta != 0.0) invalid("C is NULL but desc->beta is not 0");
  } else {
    check_aligned(C, dtype_size(t.c), "C", dtype_name(t.c));
    if (C == D &&
        (t.c != t.d || layout->c.ld != layout->d.ld || layout->c.stride != layout->d.stride))
      invalid(
          "C and D are the same buffer but their type, leading dimension or batch stride "
          "differ");
  }
  // C is not read when beta is 0. cuBLASLt is then handed D in C's place with D's layout:
  // always when C is NULL, and for fp8, whose kernels are run in place by their main users
  // (PyTorch, Transformer Engine), also when C was given. cuBLASLt accepts C == D only
  // when both descriptors agree, so this needs C's type to be D's type.
  if (!C || (d.beta == 0.0 && t.c == t.d && (is_fp8(t.a) || is_fp8(t.b)))) {
    if (t.c != t.d) {
      invalid(std::string("C is NULL but its type (") + dtype_name(t.c) + ") differs from D's (" +
              dtype_name(t.d) + "); cuBLASLt then needs a real C buffer of that type");
    }
    C = D;
    layout->c = layout->d;
  }
  if (t.bias) {
    if (!bias)
      invalid(std::string("bias is NULL but the epilogue (") + epilogue_name(d.epilogue) +
              ") adds a bias");
    check_aligned(bias, dtype_size(t.bias), "bias", dtype_name(t.bias));
  } else if (bias) {
    invalid(std::string("bias is given but the epilogue (") + epilogue_name(d.epilogue) +
            ") has none");
  }
  const struct {
    const void* ptr;
    int32_t type;
    const char* name;
    const char* matrix;
  } scales[] = {{d.a_scale, t.a, "desc->a_scale", "A"},
                {d.b_scale, t.b, "desc->b_scale", "B"},
                {d.d_scale, t.d, "desc->d_scale", "D"}};
  for (const auto& s : scales) {
    if (!s.ptr) continue;
    if (!is_fp8(s.type))
      invalid(std::string(s.name) + " is set but " + s.matrix + " is " + dtype_name(s.type) +
              ": scales apply to fp8 matrices only");
    check_aligned(s.ptr, 4, s.name, "a float scale");
  }
  return C;
}

// One input operand of the product as the caller gave it.
struct Operand {
  int32_t op;
  int64_t dim;  // its side of D: m for A, n for B
  const void* ptr;
  int32_t type;
  Stored stored;
  const void* scale;
};

}  // namespace

Problem prepare(const kjit_gemm_desc* desc, const void* A, const void* B, const void* C,
                const void* D, const void* bias) {
  if (!desc) invalid("desc is NULL");
  const kjit_gemm_desc& d = *desc;
  check_fields(d);
  const Types t = resolve_types(d);
  Layout l = check_sizes(d, t);
  C = check_pointers(d, t, A, B, C, D, bias, &l);

  // The column-major problem.
  Problem p;
  p.alpha = d.alpha;
  p.beta = d.beta;
  p.compute = t.compute;
  p.epilogue = d.epilogue;
  p.bias_type = t.bias;
  p.bias = bias;
  p.stride_bias = l.stride_bias;
  p.batch = d.batch_count;
  p.c = C;
  p.d = const_cast<void*>(D);
  p.c_type = t.c;
  p.d_type = t.d;
  p.ldc = l.c.ld;
  p.ldd = l.d.ld;
  p.stride_c = l.c.stride;
  p.stride_d = l.d.stride;
  p.d_scale = d.d_scale;
  p.k = d.k;
  // Row-major D (m x n) is column-major D^T (n x m) = op(B)^T op(A)^T: the row-major B
  // read column-major is B^T, so B becomes the first operand with B's transpose flag.
  p.swapped = d.order == KJIT_GEMM_ROW_MAJOR;
  const Operand a{d.trans_a, d.m, A, t.a, l.a, d.a_scale};
  const Operand b{d.trans_b, d.n, B, t.b, l.b, d.b_scale};
  const Operand& first = p.swapped ? b : a;
  const Operand& second = p.swapped ? a : b;
  p.op_a = first.op;
  p.op_b = second.op;
  p.m = first.dim;
  p.n = second.dim;
  p.a = first.ptr;
  p.b = second.ptr;
  p.a_type = first.type;
  p.b_type = second.type;
  p.lda = first.stored.ld;
  p.ldb = second.stored.ld;
  p.stride_a = first.stored.stride;
  p.stride_b = second.stored.stride;
  p.a_scale = first.scale;
  p.b_scale = second.scale;
  return p;
}

uint64_t d_footprint_bytes(const Problem& p) {
  const uint64_t one = uint64_t(p.ldd) * uint64_t(p.n);
  const uint64_t elems = p.batch > 1 ? uint64_t(p.batch - 1) * uint64_t(p.stride_d) + one : one;
  return elems * dtype_size(p.d_type);
}

std::string describe(const Problem& p) {
  std::ostringstream s;
  s << "m=" << p.m << " n=" << p.n << " k=" << p.k << " op(A)=" << (p.op_a ? 'T' : 'N')
    << " op(B)=" << (p.op_b ? 'T' : 'N') << " A/B/C/D=" << dtype_name(p.a_type) << "/"
    << dtype_name(p.b_type) << "/" << dtype_name(p.c_type) << "/" << dtype_name(p.d_type)
    << " compute=" << compute_name(p.compute) << " epilogue=" << epilogue_name(p.epilogue);
  if (epilogue_has_bias(p.epilogue)) s << " bias=" << dtype_name(p.bias_type);
  s << " lda=" << p.lda << " ldb=" << p.ldb << " ldc=" << p.ldc << " ldd=" << p.ldd;
  if (p.batch > 1)
    s << " batch=" << p.batch << " strides=" << p.stride_a << "/" << p.stride_b << "/" << p.stride_c
      << "/" << p.stride_d;
  s << " align=" << pointer_alignment(p.a) << "/" << pointer_alignment(p.b) << "/"
    << pointer_alignment(p.c) << "/" << pointer_alignment(p.d);
  if (p.swapped) s << " (row-major request, shown as its column-major equivalent)";
  return s.str();
}

uint32_t pointer_alignment(const void* ptr) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(ptr);
  if (v == 0) return 256;
  const uintptr_t low = v & (~v + 1);
  return low >= 256 ? 256u : uint32_t(low);
}

size_t PlanKeyHash::operator()(const PlanKey& k) const noexcept {
  // Word-wise multiply-xorshift mixing; in-process only (the persisted key is SHA-256).
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (int64_t v : k.f) {
    h ^= uint64_t(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  return size_t(h);
}

PlanKey make_key(const Problem& p, const DeviceInfo& dev, uint64_t workspace_cap) {
  PlanKey k;
  auto& f = k.f;
  f[PlanKey::kKind] = int64_t(PlanKind::kGemm);
  f[PlanKey::kOpA] = p.op_a;
  f[PlanKey::kOpB] = p.op_b;
  f[PlanKey::kM] = p.m;
  f[PlanKey::kN] = p.n;
  f[PlanKey::kK] = p.k;
  f[PlanKey::kLda] = p.lda;
  f[PlanKey::kLdb] = p.ldb;
  f[PlanKey::kLdc] = p.ldc;
  f[PlanKey::kLdd] = p.ldd;
  f[PlanKey::kAType] = p.a_type;
  f[PlanKey::kBType] = p.b_type;
  f[PlanKey::kCType] = p.c_type;
  f[PlanKey::kDType] = p.d_type;
  f[PlanKey::kBiasType] = p.bias_type;
  f[PlanKey::kCompute] = p.compute;
  f[PlanKey::kEpilogue] = p.epilogue;
  f[PlanKey::kBatch] = p.batch;
  f[PlanKey::kStrideA] = p.stride_a;
  f[PlanKey::kStrideB] = p.stride_b;
  f[PlanKey::kStrideC] = p.stride_c;
  f[PlanKey::kStrideD] = p.stride_d;
  f[PlanKey::kStrideBias] = p.stride_bias;
  f[PlanKey::kAlignA] = pointer_alignment(p.a);
  f[PlanKey::kAlignB] = pointer_alignment(p.b);
  f[PlanKey::kAlignC] = pointer_alignment(p.c);
  f[PlanKey::kAlignD] = pointer_alignment(p.d);
  f[PlanKey::kAlignBias] = epilogue_has_bias(p.epilogue) ? pointer_alignment(p.bias) : 0;
  f[PlanKey::kScales] = (p.a_scale ? 1 : 0) | (p.b_scale ? 2 : 0) | (p.d_scale ? 4 : 0);
  f[PlanKey::kInPlace] = p.c == p.d ? 1 : 0;
  f[PlanKey::kWorkspaceCap] = int64_t(workspace_cap);
  f[PlanKey::kCapability] = dev.cc_major * 10 + dev.cc_minor;
  f[PlanKey::kSmCount] = dev.sm_count;
  return k;
}

// ---- persistence ---------------------------------------------------------------------

namespace {

constexpr std::string_view kMagic("KJGP", 4);
constexpr auto kSeal = WireWriter::Seal::Raw;

void put_plan(WireWriter& w, const PersistedPlan& p) {
  w.raw(std::string_view(reinterpret_cast<const char*>(p.algo.data()), p.algo.size()));
  w.u32(uint32_t(p.config.algo_id));
  w.u32(p.config.tile);
  w.u32(p.config.stages);
  w.u32(uint32_t(p.config.split_k));
  w.u32(p.config.reduction);
  w.u32(p.config.swizzle);
  w.u32(p.config.custom);
  w.u32(p.config.inner_shape);
  w.u32(p.config.cluster_shape);
  w.u64(p.workspace);
  w.u32(p.tuned ? 1 : 0);
  w.f64(p.tuned_us);
}

PersistedPlan get_plan(WireReader& r) {
  PersistedPlan p;
  const std::string algo = r.raw(p.algo.size());
  std::memcpy(p.algo.data(), algo.data(), p.algo.size());
  p.config.algo_id = int32_t(r.u32());
  p.config.tile = r.u32();
  p.config.stages = r.u32();
  p.config.split_k = int32_t(r.u32());
  p.config.reduction = r.u32();
  p.config.swizzle = r.u32();
  p.config.custom = r.u32();
  p.config.inner_shape = r.u32();
  p.config.cluster_shape = r.u32();
  p.workspace = r.u64();
  p.tuned = r.boolean();
  p.tuned_us = r.f64();
  r.finish();
  return p;
}

}  // namespace

std::string validators(const DeviceInfo& dev) {
  return "kjit-gemm-plan/" + std::to_string(kPlanFormat) +
         ";cublasLt=" + std::to_string(dev.lt_version) +
         ";driver=" + std::to_string(dev.driver_version) + ";device=" + dev.name +
         ";cc=" + std::to_string(dev.cc_major) + "." + std::to_string(dev.cc_minor);
}

std::string persist_key(const PlanKey& key, const std::string& vals) {
  Sha256 h;
  h.field("kjit-plan-key");
  h.u64(kPlanFormat);
  h.field(vals);
  h.u64(key.f.size());
  for (int64_t v : key.f) h.u64(uint64_t(v));
  return to_hex(h.finish());
}

std::string encode_plan(const PlanKey& key, const std::string& vals, const PersistedPlan& p) {
  WireWriter w;
  w.raw(kMagic);
  w.u32(kPlanFormat);
  w.str(vals);
  w.u32(uint32_t(key.f.size()));
  for (int64_t v : key.f) w.u64(uint64_t(v));
  put_plan(w, p);
  w.seal(kSeal);
  return std::move(w.bytes());
}

std::optional<PersistedPlan> decode_plan(const std::string& value, const PlanKey& key,
                                         const std::string& vals, std::string* why) {
  const auto reject = [&](const char* reason) -> std::optional<PersistedPlan> {
    if (why) *why = reason;
    return std::nullopt;
  };
  const std::optional<std::string_view> body = unseal(value, kSeal);
  if (!body) return reject(value.size() < sizeof(Digest) ? "truncated" : "checksum mismatch");
  try {
    WireReader r(*body);
    if (r.raw(kMagic.size()) != kMagic) return reject("bad magic");
    if (r.u32() != kPlanFormat) return reject("other format version");
    if (r.str() != vals) return reject("other validators");
    if (r.u32() != key.f.size()) return reject("other key");
    for (int64_t v : key.f)
      if (r.u64() != uint64_t(v)) return reject("other key");
    return get_plan(r);
  } catch (const WireError&) {
    return reject("truncated");
  }
}

}  // namespace kjit::blas
