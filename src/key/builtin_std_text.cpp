// The texts of the built-in standard headers (builtin_std.h). Each one builds on libcu++
// (cuda::std, in the toolkit's CCCL) where it has the facility and exposes the std:: names
// that device code compiled by nvcc sees; the rest is written here. Headers with no
// meaning in device code (streams, containers, locks) declare nothing.
//
// Changing any text here changes the built-in set's version, and so the key of every
// program that uses a built-in header (builtin_std.cpp).
#include "key/builtin_std.h"

namespace kjit {
namespace {

// ---------------------------------------------------------------------------------------
// C library headers

constexpr const char kCstddef[] = R"KJIT(// kjit built-in <cstddef>
#ifndef _KJIT_STD_CSTDDEF
#define _KJIT_STD_CSTDDEF
#include <cuda/std/cstddef>
#ifndef NULL
#define NULL 0
#endif
namespace std {
using ::size_t; using ::ptrdiff_t; using cuda::std::nullptr_t; using cuda::std::max_align_t;
using cuda::std::byte; using cuda::std::to_integer;
}  // namespace std
#endif
)KJIT";

constexpr const char kCstdint[] = R"KJIT(// kjit built-in <cstdint>
#ifndef _KJIT_STD_CSTDINT
#define _KJIT_STD_CSTDINT
#include <cuda/std/cstdint>
namespace std {
using ::int8_t; using ::int16_t; using ::int32_t; using ::int64_t;
using ::uint8_t; using ::uint16_t; using ::uint32_t; using ::uint64_t;
using ::int_least8_t; using ::int_least16_t; using ::int_least32_t; using ::int_least64_t;
using ::uint_least8_t; using ::uint_least16_t; using ::uint_least32_t; using ::uint_least64_t;
using ::int_fast8_t; using ::int_fast16_t; using ::int_fast32_t; using ::int_fast64_t;
using ::uint_fast8_t; using ::uint_fast16_t; using ::uint_fast32_t; using ::uint_fast64_t;
using ::intptr_t; using ::uintptr_t; using ::intmax_t; using ::uintmax_t;
}  // namespace std
#endif
)KJIT";

constexpr const char kClimits[] = R"KJIT(// kjit built-in <climits>
#ifndef _KJIT_STD_CLIMITS
#define _KJIT_STD_CLIMITS
#include <cuda/std/climits>
#endif
)KJIT";

// IEEE 754 binary32 and binary64; long double is double in device code.
constexpr const char kCfloat[] = R"KJIT(// kjit built-in <cfloat>
#ifndef _KJIT_STD_CFLOAT
#define _KJIT_STD_CFLOAT
#define FLT_RADIX 2
#define FLT_ROUNDS 1
#define FLT_EVAL_METHOD 0
#define DECIMAL_DIG 17
#define FLT_MANT_DIG 24
#define FLT_DIG 6
#define FLT_DECIMAL_DIG 9
#define FLT_MIN_EXP (-125)
#define FLT_MIN_10_EXP (-37)
#define FLT_MAX_EXP 128
#define FLT_MAX_10_EXP 38
#define FLT_MAX 3.40282346638528859812e+38F
#define FLT_MIN 1.17549435082228750797e-38F
#define FLT_EPSILON 1.1920928955078125e-07F
#define FLT_TRUE_MIN 1.40129846432481707092e-45F
#define FLT_HAS_SUBNORM 1
#define DBL_MANT_DIG 53
#define DBL_DIG 15
#define DBL_DECIMAL_DIG 17
#define DBL_MIN_EXP (-1021)
#define DBL_MIN_10_EXP (-307)
#define DBL_MAX_EXP 1024
#define DBL_MAX_10_EXP 308
#define DBL_MAX 1.79769313486231570815e+308
#define DBL_MIN 2.22507385850720138309e-308
#define DBL_EPSILON 2.22044604925031308085e-16
#define DBL_TRUE_MIN 4.94065645841246544177e-324
#define DBL_HAS_SUBNORM 1
#define LDBL_MANT_DIG DBL_MANT_DIG
#define LDBL_DIG DBL_DIG
#define LDBL_DECIMAL_DIG DBL_DECIMAL_DIG
#define LDBL_MIN_EXP DBL_MIN_EXP
#define LDBL_MIN_10_EXP DBL_MIN_10_EXP
#define LDBL_MAX_EXP DBL_MAX_EXP
#define LDBL_MAX_10_EXP DBL_MAX_10_EXP
#define LDBL_MAX 1.79769313486231570815e+308L
#define LDBL_MIN 2.22507385850720138309e-308L
#define LDBL_EPSILON 2.22044604925031308085e-16L
#define LDBL_TRUE_MIN 4.94065645841246544177e-324L
#define LDBL_HAS_SUBNORM 1
#endif
)KJIT";

// No include guard: each inclusion defines assert anew, as NDEBUG says then.
// __assertfail is the device runtime's assertion handler (NVRTC declares it).
constexpr const char kCassert[] = R"KJIT(// kjit built-in <cassert>
#undef assert
#ifdef NDEBUG
#define assert(e) (static_cast<void>(0))
#else
#define assert(e) \
  ((e) ? static_cast<void>(0) : __assertfail(#e, __FILE__, __LINE__, __func__, sizeof(char)))
#endif
)KJIT";

// printf is NVRTC's own (the device runtime's formatted output).
constexpr const char kCstdio[] = R"KJIT(// kjit built-in <cstdio>
#ifndef _KJIT_STD_CSTDIO
#define _KJIT_STD_CSTDIO
#include <cstddef>
#ifndef EOF
#define EOF (-1)
#endif
namespace std {
using ::printf;
}  // namespace std
#endif
)KJIT";

constexpr const char kCstdlib[] = R"KJIT(// kjit built-in <cstdlib>
#ifndef _KJIT_STD_CSTDLIB
#define _KJIT_STD_CSTDLIB
#include <cstddef>
#include <cuda/std/cstdlib>
#ifndef EXIT_SUCCESS
#define EXIT_SUCCESS 0
#define EXIT_FAILURE 1
#endif
namespace std {
using ::malloc; using ::free;
using cuda::std::abs; using cuda::std::labs; using cuda::std::llabs;
using cuda::std::div; using cuda::std::ldiv; using cuda::std::lldiv;
using cuda::std::div_t; using cuda::std::ldiv_t; using cuda::std::lldiv_t;
}  // namespace std
#endif
)KJIT";

constexpr const char kCstring[] = R"KJIT(// kjit built-in <cstring>
#ifndef _KJIT_STD_CSTRING
#define _KJIT_STD_CSTRING
#include <cstddef>
#include <cuda/std/cstring>
namespace std {
using ::memcpy; using ::memset;
using cuda::std::memchr; using cuda::std::memmove; using cuda::std::memcmp;
}  // namespace std
#endif
)KJIT";

// va_list and the va_ macros are NVRTC's own.
constexpr const char kCstdarg[] = R"KJIT(// kjit built-in <cstdarg>
#ifndef _KJIT_STD_CSTDARG
#define _KJIT_STD_CSTDARG
namespace std {
using ::va_list;
}  // namespace std
#endif
)KJIT";

// clock() and clock64() are the device's cycle counters (NVRTC declares them).
constexpr const char kCtime[] = R"KJIT(// kjit built-in <ctime>
#ifndef _KJIT_STD_CTIME
#define _KJIT_STD_CTIME
#include <cstddef>
#include <cuda/std/ctime>
namespace std {
using cuda::std::clock_t; using cuda::std::time_t; using ::clock;
}  // namespace std
#endif
)KJIT";

constexpr const char kSysTime[] = R"KJIT(// kjit built-in <sys/time.h>
#ifndef _KJIT_STD_SYS_TIME_H
#define _KJIT_STD_SYS_TIME_H
#include <ctime>
struct timeval {
  long tv_sec;
  long tv_usec;
};
#endif
)KJIT";

// The <math.h> functions: libcu++'s overloads for float, double, __half and
// __nv_bfloat16 (and integers), and the device runtime's for the ones it has no overload
// set for.
constexpr const char kCmath[] = R"KJIT(// kjit built-in <cmath>
#ifndef _KJIT_STD_CMATH
#define _KJIT_STD_CMATH
#include <cuda/std/cmath>
#ifndef INFINITY
#define INFINITY __builtin_huge_valf()
#endif
#ifndef NAN
#define NAN __builtin_nanf("")
#endif
#ifndef HUGE_VALF
#define HUGE_VALF __builtin_huge_valf()
#define HUGE_VAL __builtin_huge_val()
#define HUGE_VALL __builtin_huge_vall()
#endif
#define _KJIT_U(f) using cuda::std::f;
#define _KJIT_G(f) using ::f;
namespace std {
_KJIT_U(abs) _KJIT_U(fabs) _KJIT_U(fmax) _KJIT_U(fmin)
_KJIT_U(exp) _KJIT_U(exp2) _KJIT_U(expm1) _KJIT_U(log) _KJIT_U(log10) _KJIT_U(log2)
_KJIT_U(log1p) _KJIT_U(pow) _KJIT_U(sqrt) _KJIT_U(cbrt) _KJIT_U(hypot)
_KJIT_U(sin) _KJIT_U(cos) _KJIT_U(tan) _KJIT_U(asin) _KJIT_U(acos) _KJIT_U(atan) _KJIT_U(atan2)
_KJIT_U(sinh) _KJIT_U(cosh) _KJIT_U(tanh) _KJIT_U(asinh) _KJIT_U(acosh) _KJIT_U(atanh)
_KJIT_U(tgamma) _KJIT_U(lgamma) _KJIT_U(ceil) _KJIT_U(floor) _KJIT_U(trunc) _KJIT_U(round)
_KJIT_U(lround) _KJIT_U(llround) _KJIT_U(nearbyint) _KJIT_U(rint) _KJIT_U(lrint)
_KJIT_U(llrint) _KJIT_U(frexp) _KJIT_U(ldexp) _KJIT_U(scalbn) _KJIT_U(scalbln)
_KJIT_U(ilogb) _KJIT_U(logb) _KJIT_U(nextafter) _KJIT_U(copysign)
_KJIT_U(fpclassify) _KJIT_U(isfinite) _KJIT_U(isinf) _KJIT_U(isnan) _KJIT_U(isnormal)
_KJIT_U(signbit) _KJIT_U(isgreater) _KJIT_U(isgreaterequal) _KJIT_U(isless)
_KJIT_U(islessequal) _KJIT_U(islessgreater) _KJIT_U(isunordered)
_KJIT_G(fmod) _KJIT_G(remainder) _KJIT_G(remquo) _KJIT_G(fma) _KJIT_G(fdim) _KJIT_G(erf)
_KJIT_G(erfc) _KJIT_G(modf) _KJIT_G(nan) _KJIT_G(nanf)
#if __cplusplus >= 202002L
_KJIT_U(lerp)
#endif
}  // namespace std
#undef _KJIT_U
#undef _KJIT_G
#endif
)KJIT";

// <math.h>: <cmath>, and the constants the C library of a POSIX system adds.
constexpr const char kMathH[] = R"KJIT(// kjit built-in <math.h>
#ifndef _KJIT_STD_MATH_H
#define _KJIT_STD_MATH_H
#include <cmath>
#ifndef M_PI
#define M_E 2.7182818284590452354
#define M_LOG2E 1.4426950408889634074
#define M_LOG10E 0.43429448190325182765
#define M_LN2 0.69314718055994530942
#define M_LN10 2.30258509299404568402
#define M_PI 3.14159265358979323846
#define M_PI_2 1.57079632679489661923
#define M_PI_4 0.78539816339744830962
#define M_1_PI 0.31830988618379067154
#define M_2_PI 0.63661977236758134308
#define M_2_SQRTPI 1.12837916709551257390
#define M_SQRT2 1.41421356237309504880
#define M_SQRT1_2 0.70710678118654752440
#endif
#endif
)KJIT";

// ---------------------------------------------------------------------------------------
// C++ library headers

// std::numeric_limits is a class of its own, derived from libcu++'s, so that programs
// can specialise it for their types as they do nvcc's.
constexpr const char kLimits[] = R"KJIT(// kjit built-in <limits>
#ifndef _KJIT_STD_LIMITS
#define _KJIT_STD_LIMITS
#include <cuda/std/limits>
namespace std {
template <class T>
class numeric_limits : public cuda::std::numeric_limits<T> {};
using cuda::std::float_round_style; using cuda::std::round_indeterminate;
using cuda::std::round_toward_zero; using cuda::std::round_to_nearest;
using cuda::std::round_toward_infinity; using cuda::std::round_toward_neg_infinity;
using cuda::std::float_denorm_style; using cuda::std::denorm_indeterminate;
using cuda::std::denorm_absent; using cuda::std::denorm_present;
}  // namespace std
#endif
)KJIT";

constexpr const char kTypeTraits[] = R"KJIT(// kjit built-in <type_traits>
#ifndef _KJIT_STD_TYPE_TRAITS
#define _KJIT_STD_TYPE_TRAITS
#include <cuda/std/type_traits>
#define _KJIT_U(t) using cuda::std::t;
#define _KJIT_V(t) using cuda::std::t; using cuda::std::t##_v;
#define _KJIT_T(t) using cuda::std::t; using cuda::std::t##_t;
namespace std {
_KJIT_U(integral_constant) _KJIT_U(bool_constant) _KJIT_U(true_type) _KJIT_U(false_type)
_KJIT_U(void_t)
_KJIT_V(is_void) _KJIT_V(is_null_pointer) _KJIT_V(is_integral) _KJIT_V(is_floating_point)
_KJIT_V(is_array) _KJIT_V(is_enum) _KJIT_V(is_union) _KJIT_V(is_class) _KJIT_V(is_function)
_KJIT_V(is_pointer) _KJIT_V(is_lvalue_reference) _KJIT_V(is_rvalue_reference)
_KJIT_V(is_member_object_pointer) _KJIT_V(is_member_function_pointer) _KJIT_V(is_fundamental)
_KJIT_V(is_arithmetic) _KJIT_V(is_scalar) _KJIT_V(is_object) _KJIT_V(is_compound)
_KJIT_V(is_reference) _KJIT_V(is_member_pointer) _KJIT_V(is_const) _KJIT_V(is_volatile)
_KJIT_V(is_trivial) _KJIT_V(is_trivially_copyable) _KJIT_V(is_standard_layout)
_KJIT_V(is_empty) _KJIT_V(is_polymorphic) _KJIT_V(is_abstract) _KJIT_V(is_final)
_KJIT_V(is_aggregate) _KJIT_V(is_signed) _KJIT_V(is_unsigned)
_KJIT_V(is_constructible) _KJIT_V(is_trivially_constructible) _KJIT_V(is_nothrow_constructible)
_KJIT_V(is_default_constructible) _KJIT_V(is_trivially_default_constructible)
_KJIT_V(is_nothrow_default_constructible) _KJIT_V(is_copy_constructible)
_KJIT_V(is_trivially_copy_constructible) _KJIT_V(is_nothrow_copy_constructible)
_KJIT_V(is_move_constructible) _KJIT_V(is_trivially_move_constructible)
_KJIT_V(is_nothrow_move_constructible) _KJIT_V(is_assignable) _KJIT_V(is_trivially_assignable)
_KJIT_V(is_nothrow_assignable) _KJIT_V(is_copy_assignable) _KJIT_V(is_trivially_copy_assignable)
_KJIT_V(is_nothrow_copy_assignable) _KJIT_V(is_move_assignable)
_KJIT_V(is_trivially_move_assignable) _KJIT_V(is_nothrow_move_assignable)
_KJIT_V(is_destructible) _KJIT_V(is_trivially_destructible) _KJIT_V(is_nothrow_destructible)
_KJIT_V(has_virtual_destructor) _KJIT_V(has_unique_object_representations)
_KJIT_V(is_swappable) _KJIT_V(is_nothrow_swappable) _KJIT_V(is_swappable_with)
_KJIT_V(is_nothrow_swappable_with) _KJIT_V(alignment_of) _KJIT_V(rank) _KJIT_V(extent)
_KJIT_V(is_same) _KJIT_V(is_base_of) _KJIT_V(is_convertible) _KJIT_V(is_invocable)
_KJIT_V(is_invocable_r) _KJIT_V(is_nothrow_invocable) _KJIT_V(is_nothrow_invocable_r)
_KJIT_V(conjunction) _KJIT_V(disjunction) _KJIT_V(negation)
_KJIT_T(remove_cv) _KJIT_T(remove_const) _KJIT_T(remove_volatile) _KJIT_T(add_cv)
_KJIT_T(add_const) _KJIT_T(add_volatile) _KJIT_T(remove_reference) _KJIT_T(add_lvalue_reference)
_KJIT_T(add_rvalue_reference) _KJIT_T(make_signed) _KJIT_T(make_unsigned) _KJIT_T(remove_extent)
_KJIT_T(remove_all_extents) _KJIT_T(remove_pointer) _KJIT_T(add_pointer)
_KJIT_T(aligned_storage) _KJIT_T(aligned_union) _KJIT_T(decay) _KJIT_T(enable_if)
_KJIT_T(conditional) _KJIT_T(common_type) _KJIT_T(underlying_type) _KJIT_T(invoke_result)
#if __cplusplus >= 202002L
_KJIT_T(remove_cvref) _KJIT_T(type_identity) _KJIT_T(common_reference)
_KJIT_V(is_bounded_array) _KJIT_V(is_unbounded_array) _KJIT_V(is_nothrow_convertible)
_KJIT_U(is_constant_evaluated)
#endif
}  // namespace std
#undef _KJIT_U
#undef _KJIT_V
#undef _KJIT_T
#endif
)KJIT";

// std::tuple_size and std::tuple_element are libcu++'s own declarations in namespace std
// (for structured bindings), specialised there for its tuple, pair and array.
// NVRTC declares std::move and std::forward itself (its option --builtin-move-forward, on
// by default, which defines __NV_BUILTIN_MOVE_FORWARD=1); libcu++'s beside them would make
// every call ambiguous, so they are brought into std only when NVRTC's are off.
constexpr const char kUtility[] = R"KJIT(// kjit built-in <utility>
#ifndef _KJIT_STD_UTILITY
#define _KJIT_STD_UTILITY
#include <cuda/std/utility>
#include <cuda/std/tuple>
#include <initializer_list>
namespace std {
#if !defined(__NV_BUILTIN_MOVE_FORWARD) || !__NV_BUILTIN_MOVE_FORWARD
using cuda::std::move; using cuda::std::forward;
#endif
using cuda::std::pair; using cuda::std::make_pair; using cuda::std::swap;
using cuda::std::exchange; using cuda::std::as_const;
using cuda::std::declval; using cuda::std::get; using cuda::std::integer_sequence;
using cuda::std::index_sequence; using cuda::std::make_integer_sequence;
using cuda::std::make_index_sequence; using cuda::std::index_sequence_for;
using cuda::std::piecewise_construct_t; using cuda::std::piecewise_construct;
using cuda::std::in_place_t; using cuda::std::in_place; using cuda::std::in_place_type_t;
using cuda::std::in_place_type; using cuda::std::in_place_index_t; using cuda::std::in_place_index;
template <class T>
inline constexpr size_t tuple_size_v = tuple_size<T>::value;
template <size_t I, class T>
using tuple_element_t = typename tuple_element<I, T>::type;
#if __cplusplus >= 202002L
using cuda::std::cmp_equal; using cuda::std::cmp_not_equal; using cuda::std::cmp_less;
using cuda::std::cmp_greater; using cuda::std::cmp_less_equal; using cuda::std::cmp_greater_equal;
using cuda::std::in_range;
#endif
}  // namespace std
#endif
)KJIT";

constexpr const char kTuple[] = R"KJIT(// kjit built-in <tuple>
#ifndef _KJIT_STD_TUPLE
#define _KJIT_STD_TUPLE
#include <utility>
#include <cuda/std/tuple>
namespace std {
using cuda::std::tuple; using cuda::std::make_tuple; using cuda::std::tie;
using cuda::std::forward_as_tuple; using cuda::std::tuple_cat; using cuda::std::ignore;
using cuda::std::apply; using cuda::std::make_from_tuple;
}  // namespace std
#endif
)KJIT";

constexpr const char kArray[] = R"KJIT(// kjit built-in <array>
#ifndef _KJIT_STD_ARRAY
#define _KJIT_STD_ARRAY
#include <utility>
#include <iterator>
#include <cuda/std/array>
namespace std {
using cuda::std::array;
#if __cplusplus >= 202002L
using cuda::std::to_array;
#endif
}  // namespace std
#endif
)KJIT";

constexpr const char kInitializerList[] = R"KJIT(// kjit built-in <initializer_list>
#ifndef _KJIT_STD_INITIALIZER_LIST
#define _KJIT_STD_INITIALIZER_LIST
#include <cuda/std/initializer_list>
#endif
)KJIT";

// libcu++ has no <cuda/std/algorithm>: its algorithms one by one. The range std::move is
// a function of its own where NVRTC declares the one-argument std::move (<utility>): a
// using-declaration would bring libcu++'s one-argument move along.
constexpr const char kAlgorithm[] = R"KJIT(// kjit built-in <algorithm>
#ifndef _KJIT_STD_ALGORITHM
#define _KJIT_STD_ALGORITHM
#include <utility>
#include <initializer_list>
#include <cuda/std/__algorithm/min.h>
#include <cuda/std/__algorithm/max.h>
#include <cuda/std/__algorithm/minmax.h>
#include <cuda/std/__algorithm/clamp.h>
#include <cuda/std/__algorithm/iter_swap.h>
#include <cuda/std/__algorithm/swap_ranges.h>
#include <cuda/std/__algorithm/all_of.h>
#include <cuda/std/__algorithm/any_of.h>
#include <cuda/std/__algorithm/none_of.h>
#include <cuda/std/__algorithm/for_each.h>
#include <cuda/std/__algorithm/for_each_n.h>
#include <cuda/std/__algorithm/find.h>
#include <cuda/std/__algorithm/find_if.h>
#include <cuda/std/__algorithm/find_if_not.h>
#include <cuda/std/__algorithm/find_end.h>
#include <cuda/std/__algorithm/find_first_of.h>
#include <cuda/std/__algorithm/adjacent_find.h>
#include <cuda/std/__algorithm/count.h>
#include <cuda/std/__algorithm/count_if.h>
#include <cuda/std/__algorithm/mismatch.h>
#include <cuda/std/__algorithm/equal.h>
#include <cuda/std/__algorithm/search.h>
#include <cuda/std/__algorithm/search_n.h>
#include <cuda/std/__algorithm/copy.h>
#include <cuda/std/__algorithm/copy_if.h>
#include <cuda/std/__algorithm/copy_n.h>
#include <cuda/std/__algorithm/copy_backward.h>
#include <cuda/std/__algorithm/move.h>
#include <cuda/std/__algorithm/move_backward.h>
#include <cuda/std/__algorithm/fill.h>
#include <cuda/std/__algorithm/fill_n.h>
#include <cuda/std/__algorithm/transform.h>
#include <cuda/std/__algorithm/generate.h>
#include <cuda/std/__algorithm/generate_n.h>
#include <cuda/std/__algorithm/remove.h>
#include <cuda/std/__algorithm/remove_if.h>
#include <cuda/std/__algorithm/remove_copy.h>
#include <cuda/std/__algorithm/remove_copy_if.h>
#include <cuda/std/__algorithm/replace.h>
#include <cuda/std/__algorithm/replace_if.h>
#include <cuda/std/__algorithm/replace_copy.h>
#include <cuda/std/__algorithm/replace_copy_if.h>
#include <cuda/std/__algorithm/reverse.h>
#include <cuda/std/__algorithm/reverse_copy.h>
#include <cuda/std/__algorithm/rotate.h>
#include <cuda/std/__algorithm/rotate_copy.h>
#include <cuda/std/__algorithm/unique.h>
#include <cuda/std/__algorithm/unique_copy.h>
#include <cuda/std/__algorithm/is_partitioned.h>
#include <cuda/std/__algorithm/partition.h>
#include <cuda/std/__algorithm/partition_copy.h>
#include <cuda/std/__algorithm/partition_point.h>
#include <cuda/std/__algorithm/is_sorted.h>
#include <cuda/std/__algorithm/is_sorted_until.h>
#include <cuda/std/__algorithm/partial_sort.h>
#include <cuda/std/__algorithm/partial_sort_copy.h>
#include <cuda/std/__algorithm/lower_bound.h>
#include <cuda/std/__algorithm/upper_bound.h>
#include <cuda/std/__algorithm/binary_search.h>
#include <cuda/std/__algorithm/equal_range.h>
#include <cuda/std/__algorithm/merge.h>
#include <cuda/std/__algorithm/includes.h>
#include <cuda/std/__algorithm/set_difference.h>
#include <cuda/std/__algorithm/set_intersection.h>
#include <cuda/std/__algorithm/set_symmetric_difference.h>
#include <cuda/std/__algorithm/set_union.h>
#include <cuda/std/__algorithm/min_element.h>
#include <cuda/std/__algorithm/max_element.h>
#include <cuda/std/__algorithm/minmax_element.h>
#include <cuda/std/__algorithm/lexicographical_compare.h>
#include <cuda/std/__algorithm/is_permutation.h>
#include <cuda/std/__algorithm/next_permutation.h>
#include <cuda/std/__algorithm/prev_permutation.h>
#include <cuda/std/__algorithm/is_heap.h>
#include <cuda/std/__algorithm/is_heap_until.h>
#include <cuda/std/__algorithm/push_heap.h>
#include <cuda/std/__algorithm/pop_heap.h>
#include <cuda/std/__algorithm/make_heap.h>
#include <cuda/std/__algorithm/sort_heap.h>
#define _KJIT_U(f) using cuda::std::f;
namespace std {
_KJIT_U(min) _KJIT_U(max) _KJIT_U(minmax) _KJIT_U(clamp) _KJIT_U(iter_swap)
_KJIT_U(swap_ranges) _KJIT_U(all_of) _KJIT_U(any_of) _KJIT_U(none_of) _KJIT_U(for_each)
_KJIT_U(for_each_n) _KJIT_U(find) _KJIT_U(find_if) _KJIT_U(find_if_not) _KJIT_U(find_end)
_KJIT_U(find_first_of) _KJIT_U(adjacent_find) _KJIT_U(count) _KJIT_U(count_if)
_KJIT_U(mismatch) _KJIT_U(equal) _KJIT_U(search) _KJIT_U(search_n) _KJIT_U(copy)
_KJIT_U(copy_if) _KJIT_U(copy_n) _KJIT_U(copy_backward) _KJIT_U(move_backward)
_KJIT_U(fill) _KJIT_U(fill_n) _KJIT_U(transform) _KJIT_U(generate) _KJIT_U(generate_n)
_KJIT_U(remove) _KJIT_U(remove_if) _KJIT_U(remove_copy) _KJIT_U(remove_copy_if)
_KJIT_U(replace) _KJIT_U(replace_if) _KJIT_U(replace_copy) _KJIT_U(replace_copy_if)
_KJIT_U(reverse) _KJIT_U(reverse_copy) _KJIT_U(rotate) _KJIT_U(rotate_copy) _KJIT_U(unique)
_KJIT_U(unique_copy) _KJIT_U(is_partitioned) _KJIT_U(partition) _KJIT_U(partition_copy)
_KJIT_U(partition_point) _KJIT_U(is_sorted) _KJIT_U(is_sorted_until) _KJIT_U(partial_sort)
_KJIT_U(partial_sort_copy) _KJIT_U(lower_bound) _KJIT_U(upper_bound) _KJIT_U(binary_search)
_KJIT_U(equal_range) _KJIT_U(merge) _KJIT_U(includes) _KJIT_U(set_difference)
_KJIT_U(set_intersection) _KJIT_U(set_symmetric_difference) _KJIT_U(set_union)
_KJIT_U(min_element) _KJIT_U(max_element) _KJIT_U(minmax_element)
_KJIT_U(lexicographical_compare) _KJIT_U(is_permutation) _KJIT_U(next_permutation)
_KJIT_U(prev_permutation) _KJIT_U(is_heap) _KJIT_U(is_heap_until) _KJIT_U(push_heap)
_KJIT_U(pop_heap) _KJIT_U(make_heap) _KJIT_U(sort_heap) _KJIT_U(swap)
#if !defined(__NV_BUILTIN_MOVE_FORWARD) || !__NV_BUILTIN_MOVE_FORWARD
_KJIT_U(move)
#else
template <class _InputIt, class _OutputIt>
__host__ __device__ constexpr _OutputIt move(_InputIt __first, _InputIt __last, _OutputIt __out) {
  return cuda::std::move(__first, __last, __out);
}
#endif
}  // namespace std
#undef _KJIT_U
#endif
)KJIT";

constexpr const char kComplex[] = R"KJIT(// kjit built-in <complex>
#ifndef _KJIT_STD_COMPLEX
#define _KJIT_STD_COMPLEX
#include <cmath>
#include <cuda/std/complex>
namespace std {
using cuda::std::complex; using cuda::std::real; using cuda::std::imag; using cuda::std::arg;
using cuda::std::norm; using cuda::std::conj; using cuda::std::proj; using cuda::std::polar;
// Again after <cuda/std/complex>: a using-declaration names only the overloads declared
// before it.
using cuda::std::abs; using cuda::std::exp; using cuda::std::log; using cuda::std::log10;
using cuda::std::pow; using cuda::std::sqrt; using cuda::std::sin; using cuda::std::cos;
using cuda::std::tan; using cuda::std::asin; using cuda::std::acos; using cuda::std::atan;
using cuda::std::sinh; using cuda::std::cosh; using cuda::std::tanh; using cuda::std::asinh;
using cuda::std::acosh; using cuda::std::atanh;
}  // namespace std
#endif
)KJIT";

constexpr const char kFunctional[] = R"KJIT(// kjit built-in <functional>
#ifndef _KJIT_STD_FUNCTIONAL
#define _KJIT_STD_FUNCTIONAL
#include <utility>
#include <cuda/std/functional>
#define _KJIT_U(f) using cuda::std::f;
namespace std {
_KJIT_U(plus) _KJIT_U(minus) _KJIT_U(multiplies) _KJIT_U(divides) _KJIT_U(modulus)
_KJIT_U(negate) _KJIT_U(equal_to) _KJIT_U(not_equal_to) _KJIT_U(greater) _KJIT_U(less)
_KJIT_U(greater_equal) _KJIT_U(less_equal) _KJIT_U(logical_and) _KJIT_U(logical_or)
_KJIT_U(logical_not) _KJIT_U(bit_and) _KJIT_U(bit_or) _KJIT_U(bit_xor) _KJIT_U(bit_not)
_KJIT_U(invoke) _KJIT_U(reference_wrapper) _KJIT_U(ref) _KJIT_U(cref) _KJIT_U(not_fn)
#if __cplusplus >= 202002L
_KJIT_U(identity)
#endif
}  // namespace std
#undef _KJIT_U
#endif
)KJIT";

constexpr const char kIterator[] = R"KJIT(// kjit built-in <iterator>
#ifndef _KJIT_STD_ITERATOR
#define _KJIT_STD_ITERATOR
#include <cstddef>
#include <cuda/std/iterator>
#define _KJIT_U(f) using cuda::std::f;
namespace std {
_KJIT_U(iterator_traits) _KJIT_U(input_iterator_tag) _KJIT_U(output_iterator_tag)
_KJIT_U(forward_iterator_tag) _KJIT_U(bidirectional_iterator_tag)
_KJIT_U(random_access_iterator_tag) _KJIT_U(reverse_iterator) _KJIT_U(make_reverse_iterator)
_KJIT_U(move_iterator) _KJIT_U(make_move_iterator) _KJIT_U(back_insert_iterator)
_KJIT_U(back_inserter) _KJIT_U(front_insert_iterator) _KJIT_U(front_inserter)
_KJIT_U(insert_iterator) _KJIT_U(inserter) _KJIT_U(advance) _KJIT_U(distance) _KJIT_U(next)
_KJIT_U(prev) _KJIT_U(begin) _KJIT_U(end) _KJIT_U(cbegin) _KJIT_U(cend) _KJIT_U(rbegin)
_KJIT_U(rend) _KJIT_U(crbegin) _KJIT_U(crend) _KJIT_U(size) _KJIT_U(empty) _KJIT_U(data)
}  // namespace std
#undef _KJIT_U
#endif
)KJIT";

constexpr const char kNumeric[] = R"KJIT(// kjit built-in <numeric>
#ifndef _KJIT_STD_NUMERIC
#define _KJIT_STD_NUMERIC
#include <iterator>
#include <cuda/std/numeric>
#define _KJIT_U(f) using cuda::std::f;
namespace std {
_KJIT_U(accumulate) _KJIT_U(inner_product) _KJIT_U(partial_sum) _KJIT_U(adjacent_difference)
_KJIT_U(iota) _KJIT_U(reduce) _KJIT_U(transform_reduce) _KJIT_U(exclusive_scan)
_KJIT_U(inclusive_scan) _KJIT_U(transform_exclusive_scan) _KJIT_U(transform_inclusive_scan)
_KJIT_U(gcd) _KJIT_U(lcm)
#if __cplusplus >= 202002L
_KJIT_U(midpoint)
#endif
}  // namespace std
#undef _KJIT_U
#endif
)KJIT";

// std::construct_at is libcu++'s own declaration in namespace std under C++20.
constexpr const char kMemory[] = R"KJIT(// kjit built-in <memory>
#ifndef _KJIT_STD_MEMORY
#define _KJIT_STD_MEMORY
#include <cstddef>
#include <new>
#include <iterator>
#include <cuda/std/memory>
namespace std {
using cuda::std::addressof; using cuda::std::pointer_traits; using cuda::std::align;
}  // namespace std
#endif
)KJIT";

// Placement new is NVRTC's own.
constexpr const char kNew[] = R"KJIT(// kjit built-in <new>
#ifndef _KJIT_STD_NEW
#define _KJIT_STD_NEW
#include <cstddef>
#endif
)KJIT";

// What a header with no meaning in device code says. The C headers (<stdint.h> ...) are
// their C++ header: in device code both give the global names too.
#define KJIT_NOTHING(name) \
  "// kjit built-in <" name ">: nothing of it exists in device code; declares nothing.\n"

}  // namespace

const std::vector<BuiltinHeader>& builtin_std_texts() {
  static const std::vector<BuiltinHeader> all = {
      {"algorithm", kAlgorithm},
      {"array", kArray},
      {"assert.h", kCassert},
      {"cassert", kCassert},
      {"cfloat", kCfloat},
      {"climits", kClimits},
      {"cmath", kCmath},
      {"complex", kComplex},
      {"cstdarg", kCstdarg},
      {"cstddef", kCstddef},
      {"cstdint", kCstdint},
      {"cstdio", kCstdio},
      {"cstdlib", kCstdlib},
      {"cstring", kCstring},
      {"ctime", kCtime},
      {"cxxabi.h", KJIT_NOTHING("cxxabi.h")},
      {"exception", KJIT_NOTHING("exception")},
      {"float.h", "#include <cfloat>\n"},
      {"functional", kFunctional},
      {"initializer_list", kInitializerList},
      {"iomanip", KJIT_NOTHING("iomanip")},
      {"iostream", KJIT_NOTHING("iostream")},
      {"istream", KJIT_NOTHING("istream")},
      {"iterator", kIterator},
      {"limits", kLimits},
      {"limits.h", "#include <climits>\n"},
      {"map", KJIT_NOTHING("map")},
      {"math.h", kMathH},
      {"memory", kMemory},
      {"memory.h", "#include <cstring>\n"},
      {"mutex", KJIT_NOTHING("mutex")},
      {"new", kNew},
      {"numeric", kNumeric},
      {"ostream", KJIT_NOTHING("ostream")},
      {"sstream", KJIT_NOTHING("sstream")},
      {"stack", KJIT_NOTHING("stack")},
      {"stdarg.h", "#include <cstdarg>\n"},
      {"stddef.h", "#include <cstddef>\n"},
      {"stdexcept", KJIT_NOTHING("stdexcept")},
      {"stdint.h", "#include <cstdint>\n"},
      {"stdio.h", "#include <cstdio>\n"},
      {"stdlib.h", "#include <cstdlib>\n"},
      {"string", KJIT_NOTHING("string")},
      {"string.h", "#include <cstring>\n"},
      {"sys/time.h", kSysTime},
      {"time.h", "#include <ctime>\n"},
      {"tuple", kTuple},
      {"type_traits", kTypeTraits},
      {"typeinfo", KJIT_NOTHING("typeinfo")},
      {"utility", kUtility},
      {"vector", KJIT_NOTHING("vector")},
  };
  return all;
}

}  // namespace kjit
