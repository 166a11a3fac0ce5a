package kjit

/*
#include <stdint.h>
#include <kjit/kjit.h>
#include <kjit/gemm.h>

// Device addresses cross as integers and become pointers on the C side.
#define KJITGO_PTR(x) ((void*)(uintptr_t)(x))
static void kjitgo_gemm_scales(kjit_gemm_desc* d, uint64_t a, uint64_t b, uint64_t s) {
  d->a_scale = KJITGO_PTR(a);
  d->b_scale = KJITGO_PTR(b);
  d->d_scale = KJITGO_PTR(s);
}
static kjit_status kjitgo_gemm_check(const kjit_gemm_desc* d, uint64_t A, uint64_t B,
                                     uint64_t C, uint64_t D, uint64_t bias) {
  return kjit_gemm_check(d, KJITGO_PTR(A), KJITGO_PTR(B), KJITGO_PTR(C), KJITGO_PTR(D),
                         KJITGO_PTR(bias));
}
static kjit_status kjitgo_gemm_run(kjit_gemm* g, const kjit_gemm_desc* d, uint64_t A,
                                   uint64_t B, uint64_t C, uint64_t D, uint64_t bias,
                                   void* stream) {
  return kjit_gemm_run(g, d, KJITGO_PTR(A), KJITGO_PTR(B), KJITGO_PTR(C), KJITGO_PTR(D),
                       KJITGO_PTR(bias), stream);
}
*/
import "C"

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// GEMM element types (kjit_gemm_dtype).
const (
	GemmDTypeDefault int32 = 0
	GemmF32          int32 = 1
	GemmF16          int32 = 2
	GemmBF16         int32 = 3
	GemmF8E4M3       int32 = 4
	GemmF8E5M2       int32 = 5
	GemmF64          int32 = 6
)

// GEMM storage orders, operations and epilogues (see include/kjit/gemm.h).
const (
	GemmColMajor int32 = 0
	GemmRowMajor int32 = 1
	GemmOpN      int32 = 0
	GemmOpT      int32 = 1

	GemmEpilogueNone     int32 = 0
	GemmEpilogueBias     int32 = 1
	GemmEpilogueReLU     int32 = 2
	GemmEpilogueReLUBias int32 = 3
	GemmEpilogueGELU     int32 = 4
	GemmEpilogueGELUBias int32 = 5
)

// GemmDesc is one GEMM problem, field for field kjit_gemm_desc (sizes count elements).
// Start from NewGemmDesc, which has the library's defaults.
type GemmDesc struct {
	Order, TransA, TransB      int32
	M, N, K                    int64
	LDA, LDB, LDC, LDD         int64
	AType, BType, CType, DType int32
	Compute, Epilogue          int32
	BiasType                   int32
	BatchCount                 int64
	StrideA, StrideB, StrideC  int64
	StrideD, StrideBias        int64
	Alpha, Beta                float64
	AScale, BScale, DScale     DevicePtr // fp8 scaling factors (device pointers), 0 = none
}

// NewGemmDesc returns KJIT_GEMM_DESC_INIT: column-major, no transposes, alpha 1, beta 0,
// one batch.
func NewGemmDesc() GemmDesc { return GemmDesc{BatchCount: 1, Alpha: 1} }

func (d *GemmDesc) c() C.kjit_gemm_desc {
	var c C.kjit_gemm_desc
	c.struct_size = C.uint32_t(unsafe.Sizeof(c))
	c.order, c.trans_a, c.trans_b = C.int32_t(d.Order), C.int32_t(d.TransA), C.int32_t(d.TransB)
	c.m, c.n, c.k = C.int64_t(d.M), C.int64_t(d.N), C.int64_t(d.K)
	c.lda, c.ldb, c.ldc, c.ldd = C.int64_t(d.LDA), C.int64_t(d.LDB), C.int64_t(d.LDC), C.int64_t(d.LDD)
	c.a_type, c.b_type, c.c_type, c.d_type = C.int32_t(d.AType), C.int32_t(d.BType), C.int32_t(d.CType), C.int32_t(d.DType)
	c.compute, c.epilogue, c.bias_type = C.int32_t(d.Compute), C.int32_t(d.Epilogue), C.int32_t(d.BiasType)
	c.batch_count = C.int64_t(d.BatchCount)
	c.stride_a, c.stride_b, c.stride_c = C.int64_t(d.StrideA), C.int64_t(d.StrideB), C.int64_t(d.StrideC)
	c.stride_d, c.stride_bias = C.int64_t(d.StrideD), C.int64_t(d.StrideBias)
	c.alpha, c.beta = C.double(d.Alpha), C.double(d.Beta)
	C.kjitgo_gemm_scales(&c, C.uint64_t(d.AScale), C.uint64_t(d.BScale), C.uint64_t(d.DScale))
	return c
}

// GemmCheck checks a problem and its device pointers without a GPU (pointers are only
// compared with 0 and checked for alignment). Pass 0 for C and bias when unused.
func GemmCheck(desc *GemmDesc, a, b, c, d, bias DevicePtr) error {
	cd := desc.c()
	return call(func() C.kjit_status {
		return C.kjitgo_gemm_check(&cd, C.uint64_t(a), C.uint64_t(b), C.uint64_t(c), C.uint64_t(d), C.uint64_t(bias))
	})
}

// CuBLASLtVersion is cuBLASLt's run-time version, e.g. 130100 (loads cuBLASLt if needed).
func CuBLASLtVersion() (int, error) {
	var v C.size_t
	err := call(func() C.kjit_status { return C.kjit_cublaslt_version(&v) })
	return int(v), err
}

// GemmOptions are the options of NewGemm; zeros mean the library's defaults.
type GemmOptions struct {
	PlanCapacity       uint32 // plans kept in memory (LRU); 0 = 64
	Autotune           bool   // time the best candidates on a plan miss
	AutotuneCandidates uint32
	AutotuneWarmup     uint32
	AutotuneReps       uint32
	MaxWorkspaceBytes  uint64 // workspace cap per stream; 0 = 32 MiB
}

// GemmStats are the counters of a Gemm handle.
type GemmStats struct {
	Runs, MemoryHits, DiskHits, Misses, HeuristicQueries, Autotunes uint64
	DiskRejected, DiskWrites, Evictions, Plans, WorkspaceBytes      uint64
}

// Gemm is a cuBLASLt GEMM handle with a plan cache, persisted in the cache it was created
// with. Any number of goroutines may Run on one handle; Close it when done.
type Gemm struct {
	h     *C.kjit_gemm
	cache *Cache
}

// NewGemm creates a handle for device; cache and opts may be nil. An error with
// StatusCUDAUnavailable without a driver or device.
func NewGemm(cache *Cache, device int, opts *GemmOptions) (*Gemm, error) {
	if cache != nil && cache.h == nil {
		return nil, &Error{Status: StatusInvalidHandle, Message: "cache is closed"}
	}
	var o C.kjit_gemm_options
	if err := call(func() C.kjit_status {
		return C.kjit_gemm_options_init_sized(&o, C.size_t(unsafe.Sizeof(o)))
	}); err != nil {
		return nil, err
	}
	if opts != nil {
		o.plan_capacity = C.uint32_t(opts.PlanCapacity)
		o.autotune = cBool(opts.Autotune)
		o.autotune_candidates = C.uint32_t(opts.AutotuneCandidates)
		o.autotune_warmup = C.uint32_t(opts.AutotuneWarmup)
		o.autotune_reps = C.uint32_t(opts.AutotuneReps)
		o.max_workspace_bytes = C.uint64_t(opts.MaxWorkspaceBytes)
	}
	var h *C.kjit_gemm
	err := call(func() C.kjit_status { return C.kjit_gemm_create(cache.handle(), C.int(device), &o, &h) })
	runtime.KeepAlive(cache)
	if err != nil {
		return nil, err
	}
	g := &Gemm{h: h, cache: cache}
	if cache != nil {
		atomic.AddInt32(&cache.users, 1)
	}
	runtime.SetFinalizer(g, (*Gemm).Close)
	return g, nil
}

// Close destroys the handle, waiting for its enqueued GEMMs. Closing twice is a no-op.
func (g *Gemm) Close() error {
	if g == nil || g.h == nil {
		return nil
	}
	C.kjit_gemm_destroy(g.h)
	g.h = nil
	if g.cache != nil {
		atomic.AddInt32(&g.cache.users, -1)
		g.cache = nil
	}
	runtime.SetFinalizer(g, nil)
	return nil
}

func (g *Gemm) handle() *C.kjit_gemm {
	if g == nil {
		return nil
	}
	return g.h
}

// Run enqueues D = epilogue(alpha * op(A) * op(B) + beta * C) on stream (nil = the legacy
// default stream). Pass 0 for c when beta is 0 and for bias without a bias epilogue.
func (g *Gemm) Run(desc *GemmDesc, a, b, c, d, bias DevicePtr, stream unsafe.Pointer) error {
	cd := desc.c()
	err := call(func() C.kjit_status {
		return C.kjitgo_gemm_run(g.handle(), &cd, C.uint64_t(a), C.uint64_t(b), C.uint64_t(c),
			C.uint64_t(d), C.uint64_t(bias), stream)
	})
	runtime.KeepAlive(g)
	return err
}

// ClearPlans drops every plan of the memory tier. Must not race with Run.
func (g *Gemm) ClearPlans() error {
	err := call(func() C.kjit_status { return C.kjit_gemm_clear_plans(g.handle()) })
	runtime.KeepAlive(g)
	return err
}

// Stats reads the handle's counters.
func (g *Gemm) Stats() (GemmStats, error) {
	var s C.kjit_gemm_stats
	s.struct_size = C.uint32_t(unsafe.Sizeof(s))
	err := call(func() C.kjit_status { return C.kjit_gemm_stats_get(g.handle(), &s) })
	runtime.KeepAlive(g)
	return GemmStats{
		Runs: uint64(s.runs), MemoryHits: uint64(s.memory_hits), DiskHits: uint64(s.disk_hits),
		Misses: uint64(s.misses), HeuristicQueries: uint64(s.heuristic_queries),
		Autotunes: uint64(s.autotunes), DiskRejected: uint64(s.disk_rejected),
		DiskWrites: uint64(s.disk_writes), Evictions: uint64(s.evictions), Plans: uint64(s.plans),
		WorkspaceBytes: uint64(s.workspace_bytes),
	}, err
}
