package kjit

/*
#include <stdint.h>
#include <kjit/kjit.h>
#include <kjit/grouped_gemm.h>

#define KJITGO_GPTR(x) ((void*)(uintptr_t)(x))
static kjit_status kjitgo_grouped_check(const kjit_grouped_gemm_desc* d, uint64_t A, uint64_t B,
                                        uint64_t offs, uint64_t C, uint64_t D, uint64_t bias) {
  return kjit_grouped_gemm_check(d, KJITGO_GPTR(A), KJITGO_GPTR(B),
                                 (const int32_t*)KJITGO_GPTR(offs), KJITGO_GPTR(C),
                                 KJITGO_GPTR(D), KJITGO_GPTR(bias));
}
static kjit_status kjitgo_grouped_run(kjit_grouped_gemm* g, const kjit_grouped_gemm_desc* d,
                                      uint64_t A, uint64_t B, uint64_t offs, uint64_t C,
                                      uint64_t D, uint64_t bias, void* stream) {
  return kjit_grouped_gemm_run(g, d, KJITGO_GPTR(A), KJITGO_GPTR(B),
                               (const int32_t*)KJITGO_GPTR(offs), KJITGO_GPTR(C),
                               KJITGO_GPTR(D), KJITGO_GPTR(bias), stream);
}
static kjit_status kjitgo_grouped_run_scaled(kjit_grouped_gemm* g,
                                             const kjit_grouped_gemm_desc* d, uint64_t A,
                                             uint64_t B, uint64_t offs, uint64_t C, uint64_t D,
                                             uint64_t bias, uint64_t sa, uint64_t sb,
                                             void* stream) {
  return kjit_grouped_gemm_run_scaled(g, d, KJITGO_GPTR(A), KJITGO_GPTR(B),
                                      (const int32_t*)KJITGO_GPTR(offs), KJITGO_GPTR(C),
                                      KJITGO_GPTR(D), KJITGO_GPTR(bias),
                                      (const float*)KJITGO_GPTR(sa),
                                      (const float*)KJITGO_GPTR(sb), stream);
}
static kjit_status kjitgo_grouped_plan_key(kjit_grouped_gemm* g, const kjit_grouped_gemm_desc* d,
                                           uint64_t A, uint64_t B, uint64_t C, uint64_t D,
                                           uint64_t bias, char* buf, size_t size) {
  return kjit_grouped_gemm_plan_key(g, d, KJITGO_GPTR(A), KJITGO_GPTR(B), KJITGO_GPTR(C),
                                    KJITGO_GPTR(D), KJITGO_GPTR(bias), buf, size, NULL);
}
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// Grouped GEMM B orders, activations and schedules (see include/kjit/grouped_gemm.h).
const (
	GroupedBKN int32 = 0 // B is (G, K, N)
	GroupedBNK int32 = 1 // B is (G, N, K): a linear layer's weight

	GroupedActNone int32 = 0
	GroupedActReLU int32 = 1
	GroupedActGELU int32 = 2
	GroupedActSiLU int32 = 3
	// GroupedActSwiGLU: silu(gate) * up over B's two column halves (gate first); D has N/2 columns.
	GroupedActSwiGLU int32 = 4

	GroupedScheduleAuto        int32 = 0
	GroupedScheduleCooperative int32 = 1
	GroupedSchedulePingpong    int32 = 2

	// Scales of fp8 inputs (GroupedDesc.ScaleMode, since 0.3).
	GroupedScaleNone     int32 = 0 // no scales
	GroupedScaleRowwise  int32 = 1 // scale_a: Rows float32; scale_b: G x N float32
	GroupedScaleBlock128 int32 = 2 // scale_a: Rows x ceil(K/128); scale_b: G x ceil(N/128) x ceil(K/128)
)

// GroupedDesc is one grouped GEMM problem, field for field kjit_grouped_gemm_desc (sizes
// count elements). Start from NewGroupedDesc, which has the library's defaults.
type GroupedDesc struct {
	Groups              int32
	Rows, N, K          int64
	AType, BType, DType int32 // GemmBF16, GemmF8E4M3 (A and B, since 0.3) or GemmDTypeDefault
	BOrder, Activation  int32
	LDA, LDB, LDC, LDD  int64
	StrideB, StrideBias int64
	Alpha, Beta         float64
	ScaleMode           int32 // GroupedScale*: fp8 inputs' scales (since 0.3)
}

// NewGroupedDesc returns KJIT_GROUPED_GEMM_DESC_INIT: bf16, B order KN, alpha 1, beta 0.
func NewGroupedDesc() GroupedDesc { return GroupedDesc{Alpha: 1} }

func (d *GroupedDesc) c() C.kjit_grouped_gemm_desc {
	var c C.kjit_grouped_gemm_desc
	c.struct_size = C.uint32_t(unsafe.Sizeof(c))
	c.groups = C.int32_t(d.Groups)
	c.rows, c.n, c.k = C.int64_t(d.Rows), C.int64_t(d.N), C.int64_t(d.K)
	c.a_type, c.b_type, c.d_type = C.int32_t(d.AType), C.int32_t(d.BType), C.int32_t(d.DType)
	c.b_order, c.activation = C.int32_t(d.BOrder), C.int32_t(d.Activation)
	c.lda, c.ldb, c.ldc, c.ldd = C.int64_t(d.LDA), C.int64_t(d.LDB), C.int64_t(d.LDC), C.int64_t(d.LDD)
	c.stride_b, c.stride_bias = C.int64_t(d.StrideB), C.int64_t(d.StrideBias)
	c.alpha, c.beta = C.double(d.Alpha), C.double(d.Beta)
	c.scale_mode = C.int32_t(d.ScaleMode)
	return c
}

// GroupedCheck checks a problem and its device pointers without a GPU (pointers are only
// compared with 0 and checked for alignment). offs is the device array of G int32
// cumulative row ends. Pass 0 for c and bias when unused.
func GroupedCheck(desc *GroupedDesc, a, b, offs, c, d, bias DevicePtr) error {
	cd := desc.c()
	return call(func() C.kjit_status {
		return C.kjitgo_grouped_check(&cd, C.uint64_t(a), C.uint64_t(b), C.uint64_t(offs),
			C.uint64_t(c), C.uint64_t(d), C.uint64_t(bias))
	})
}

// GroupedCheckScaled checks a RunScaled call's problem and device pointers without a GPU,
// as RunScaled does before it looks at its handle; nil when they are good.
func GroupedCheckScaled(desc *GroupedDesc, a, b, offs, c, d, bias, scaleA, scaleB DevicePtr) error {
	err := groupedRunScaled(nil, desc, a, b, offs, c, d, bias, scaleA, scaleB, nil)
	// A nil handle: the library checks everything else first, then answers InvalidHandle.
	if e, ok := err.(*Error); ok && e.Status == StatusInvalidHandle {
		return nil
	}
	return err
}

func groupedRunScaled(h *C.kjit_grouped_gemm, desc *GroupedDesc, a, b, offs, c, d, bias, scaleA, scaleB DevicePtr, stream unsafe.Pointer) error {
	if (scaleA == 0) != (scaleB == 0) {
		return &Error{Status: StatusInvalidArgument, Message: "scale_a and scale_b come together"}
	}
	cd := desc.c()
	return call(func() C.kjit_status {
		return C.kjitgo_grouped_run_scaled(h, &cd, C.uint64_t(a), C.uint64_t(b), C.uint64_t(offs),
			C.uint64_t(c), C.uint64_t(d), C.uint64_t(bias), C.uint64_t(scaleA), C.uint64_t(scaleB), stream)
	})
}

// GroupedOptions are the options of NewGroupedGemm; zeros mean "chosen per shape".
type GroupedOptions struct {
	TileN, Stages uint32 // sm_90a kernel: tile width 128 or 256, pipeline stages 2..8
	PortableOnly  bool   // the portable kernel even on sm_90
	Schedule      int32  // GroupedSchedule*
	// ClusterM: CTAs per thread-block cluster along the rows of the sm_90a kernel, 0
	// (chosen), 1 or 2 (two CTAs share each copy of B's tile; the cooperative schedule,
	// bf16 inputs).
	ClusterM uint32
}

// GroupedGemm is a grouped-GEMM handle on one device; its kernels compile through the
// Compiler it was made with. Any number of goroutines may Run on it; Close it when done.
type GroupedGemm struct {
	h        *C.kjit_grouped_gemm
	compiler *Compiler
}

// NewGroupedGemm creates a handle for device; opts may be nil. An error with
// StatusCUDAUnavailable without a driver or device.
func NewGroupedGemm(compiler *Compiler, device int, opts *GroupedOptions) (*GroupedGemm, error) {
	if compiler == nil || compiler.h == nil {
		return nil, &Error{Status: StatusInvalidHandle, Message: "compiler is nil or closed"}
	}
	var o C.kjit_grouped_gemm_options
	if err := call(func() C.kjit_status {
		return C.kjit_grouped_gemm_options_init_sized(&o, C.size_t(unsafe.Sizeof(o)))
	}); err != nil {
		return nil, err
	}
	if opts != nil {
		o.tile_n, o.stages = C.uint32_t(opts.TileN), C.uint32_t(opts.Stages)
		o.portable_only = cBool(opts.PortableOnly)
		o.schedule = C.int(opts.Schedule)
		o.cluster_m = C.uint32_t(opts.ClusterM)
	}
	var h *C.kjit_grouped_gemm
	err := call(func() C.kjit_status {
		return C.kjit_grouped_gemm_create(compiler.h, C.int(device), &o, &h)
	})
	runtime.KeepAlive(compiler)
	if err != nil {
		return nil, err
	}
	g := &GroupedGemm{h: h, compiler: compiler}
	runtime.SetFinalizer(g, (*GroupedGemm).Close)
	return g, nil
}

// Close destroys the handle. Closing twice is a no-op.
func (g *GroupedGemm) Close() error {
	if g == nil || g.h == nil {
		return nil
	}
	C.kjit_grouped_gemm_destroy(g.h)
	g.h = nil
	g.compiler = nil
	runtime.SetFinalizer(g, nil)
	return nil
}

func (g *GroupedGemm) handle() *C.kjit_grouped_gemm {
	if g == nil {
		return nil
	}
	return g.h
}

// Run enqueues D = act(alpha * A B_g + beta * C + bias_g) for the rows of every group on
// stream (nil = the legacy default stream). Pass 0 for c when beta is 0 and for bias when
// there is none.
func (g *GroupedGemm) Run(desc *GroupedDesc, a, b, offs, c, d, bias DevicePtr, stream unsafe.Pointer) error {
	cd := desc.c()
	err := call(func() C.kjit_status {
		return C.kjitgo_grouped_run(g.handle(), &cd, C.uint64_t(a), C.uint64_t(b), C.uint64_t(offs),
			C.uint64_t(c), C.uint64_t(d), C.uint64_t(bias), stream)
	})
	runtime.KeepAlive(g)
	return err
}

// RunScaled is Run with fp8 e4m3 inputs (AType GemmF8E4M3) and the scales of
// desc.ScaleMode (kjit_grouped_gemm_run_scaled, since 0.3): GroupedScaleRowwise takes scaleA
// (Rows float32) and scaleB (G x N float32, packed), GroupedScaleBlock128 scaleA (Rows x
// ceil(K/128)) and scaleB (G x ceil(N/128) x ceil(K/128)); D stays bf16. Both scales are
// given (non-zero) together or neither (StatusInvalidArgument before the C call).
func (g *GroupedGemm) RunScaled(desc *GroupedDesc, a, b, offs, c, d, bias, scaleA, scaleB DevicePtr, stream unsafe.Pointer) error {
	err := groupedRunScaled(g.handle(), desc, a, b, offs, c, d, bias, scaleA, scaleB, stream)
	runtime.KeepAlive(g)
	return err
}

// Prepare compiles (or hits) and loads the kernel a Run of desc would use.
func (g *GroupedGemm) Prepare(desc *GroupedDesc, withBias bool) error {
	cd := desc.c()
	err := call(func() C.kjit_status { return C.kjit_grouped_gemm_prepare(g.handle(), &cd, cBool(withBias)) })
	runtime.KeepAlive(g)
	return err
}

// PlanKey names the configuration a Run with these pointers would use.
func (g *GroupedGemm) PlanKey(desc *GroupedDesc, a, b, c, d, bias DevicePtr) (string, error) {
	cd := desc.c()
	var buf [256]C.char
	err := call(func() C.kjit_status {
		return C.kjitgo_grouped_plan_key(g.handle(), &cd, C.uint64_t(a), C.uint64_t(b), C.uint64_t(c),
			C.uint64_t(d), C.uint64_t(bias), &buf[0], C.size_t(len(buf)))
	})
	runtime.KeepAlive(g)
	if err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}
