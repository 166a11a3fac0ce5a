package kjit

/*
#include <stdlib.h>
#include <kjit/kjit.h>
*/
import "C"

import (
	"runtime"
	"strconv"
	"unsafe"
)

// Tier says where a binary came from.
type Tier int

// Tiers.
const (
	TierCompiled Tier = 0 // NVRTC ran for this request
	TierMemory   Tier = 1 // in-process memory tier hit
	TierDisk     Tier = 2 // SQLite tier hit (this or another process compiled it)
	TierRemote   Tier = 3 // remote tier hit
)

func (t Tier) String() string {
	switch t {
	case TierCompiled:
		return "compiled"
	case TierMemory:
		return "memory"
	case TierDisk:
		return "disk"
	case TierRemote:
		return "remote"
	}
	return "Tier(" + strconv.Itoa(int(t)) + ")"
}

// Binary is a compiled result. Immutable and safe for concurrent use; Close it when done.
// Strings and byte slices returned by its methods are copies.
type Binary struct {
	h *C.kjit_binary
}

func newBinary(h *C.kjit_binary) *Binary {
	b := &Binary{h: h}
	runtime.SetFinalizer(b, (*Binary).Close)
	return b
}

// Close frees the binary. Closing twice is a no-op.
func (b *Binary) Close() error {
	if b != nil && b.h != nil {
		C.kjit_binary_destroy(b.h)
		b.h = nil
		runtime.SetFinalizer(b, nil)
	}
	return nil
}

func (b *Binary) handle() *C.kjit_binary {
	if b == nil {
		return nil
	}
	return b.h
}

// Data returns a copy of one output (nil when the binary has none).
func (b *Binary) Data(kind Outputs) []byte {
	var size C.size_t
	p := C.kjit_binary_data(b.handle(), C.int(kind), &size)
	var out []byte
	if p != nil {
		out = C.GoBytes(p, C.int(size))
	}
	runtime.KeepAlive(b)
	return out
}

// PTX returns the PTX text ("" when there is none).
func (b *Binary) PTX() string { return string(b.Data(OutputPTX)) }

// CUBIN returns the CUBIN (nil when there is none).
func (b *Binary) CUBIN() []byte { return b.Data(OutputCUBIN) }

// LTOIR returns the LTO-IR (nil when there is none).
func (b *Binary) LTOIR() []byte { return b.Data(OutputLTOIR) }

func (b *Binary) str(f func(*C.kjit_binary) *C.char) string {
	s := C.GoString(f(b.handle()))
	runtime.KeepAlive(b)
	return s
}

// Log is NVRTC's log (warnings on success).
func (b *Binary) Log() string {
	return b.str(func(h *C.kjit_binary) *C.char { return C.kjit_binary_log(h) })
}

// Target is the exact target compiled for, e.g. "sm_90".
func (b *Binary) Target() string {
	return b.str(func(h *C.kjit_binary) *C.char { return C.kjit_binary_target(h) })
}

// Key is the cache key: 64 lowercase hex digits.
func (b *Binary) Key() string {
	return b.str(func(h *C.kjit_binary) *C.char { return C.kjit_binary_key(h) })
}

// MetadataJSON is the entry's metadata as a JSON object.
func (b *Binary) MetadataJSON() string {
	return b.str(func(h *C.kjit_binary) *C.char { return C.kjit_binary_metadata_json(h) })
}

// Tier says where the binary came from.
func (b *Binary) Tier() Tier {
	t := C.kjit_binary_tier(b.handle())
	runtime.KeepAlive(b)
	return Tier(t)
}

// CompileMS is the milliseconds NVRTC took when this result was first compiled.
func (b *Binary) CompileMS() float64 {
	ms := C.kjit_binary_compile_ms(b.handle())
	runtime.KeepAlive(b)
	return float64(ms)
}

// LoweredName is the lowered (mangled) name of a name expression given at compile time.
func (b *Binary) LoweredName(expr string) (string, bool) {
	e, err := cString("name expression", expr, StatusInvalidArgument)
	if err != nil {
		return "", false // no name expression holds a NUL byte
	}
	defer C.free(unsafe.Pointer(e))
	p := C.kjit_binary_lowered_name(b.handle(), e)
	runtime.KeepAlive(b)
	if p == nil {
		return "", false
	}
	return C.GoString(p), true
}

// NameExpression pairs a name expression with its lowered name.
type NameExpression struct {
	Expr    string
	Lowered string
}

// NameExpressions lists the name expressions and their lowered names, in order.
func (b *Binary) NameExpressions() []NameExpression {
	n := int(C.kjit_binary_name_count(b.handle()))
	out := make([]NameExpression, n)
	for i := 0; i < n; i++ {
		out[i] = NameExpression{
			Expr:    C.GoString(C.kjit_binary_name_expression(b.handle(), C.size_t(i))),
			Lowered: C.GoString(C.kjit_binary_lowered_name_at(b.handle(), C.size_t(i))),
		}
	}
	runtime.KeepAlive(b)
	return out
}

// KernelNames lists the __global__ entry points found in the PTX, in order.
func (b *Binary) KernelNames() []string {
	n := int(C.kjit_binary_kernel_count(b.handle()))
	out := make([]string, n)
	for i := 0; i < n; i++ {
		out[i] = C.GoString(C.kjit_binary_kernel_name(b.handle(), C.size_t(i)))
	}
	runtime.KeepAlive(b)
	return out
}

// Load loads the kernel called name from this binary onto device.
func (b *Binary) Load(name string, device int, flags KernelFlags) (*Kernel, error) {
	nm, err := cString("kernel name", name, StatusInvalidArgument)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(nm))
	var out *C.kjit_kernel
	err = call(func() C.kjit_status {
		return C.kjit_kernel_from_binary(b.handle(), nm, C.int(device), C.uint(flags), &out)
	})
	runtime.KeepAlive(b)
	if err != nil {
		return nil, err
	}
	return newKernel(out)
}

// Status is StatusOK for a usable binary (binaries returned by Compile always are).
func (b *Binary) Status() Status {
	s := C.kjit_binary_status(b.handle())
	runtime.KeepAlive(b)
	return Status(s)
}
