package kjit

/*
#include <kjit/kjit.h>
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"unsafe"
)

// KernelFlags are KJIT_KERNEL_* flags.
type KernelFlags uint32

// Kernel flags.
const (
	KernelDefault KernelFlags = 0
	// KernelNoReload fails with StatusStaleHandle instead of reloading after a context
	// reset.
	KernelNoReload KernelFlags = 1
	// KernelForcePTX loads PTX through the driver JIT even when a CUBIN is available.
	KernelForcePTX KernelFlags = 2
)

// LoadPath says how a kernel's code was loaded.
type LoadPath int

// Load paths.
const (
	LoadCUBIN LoadPath = 0
	LoadPTX   LoadPath = 1
)

// String is "cubin" or "ptx" (LoadPath(N) for a value this version does not know).
func (p LoadPath) String() string {
	switch p {
	case LoadCUBIN:
		return "cubin"
	case LoadPTX:
		return "ptx"
	}
	return "LoadPath(" + strconv.Itoa(int(p)) + ")"
}

// String lists the flags, e.g. "no-reload|force-ptx"; "default" for none.
func (f KernelFlags) String() string {
	return flagString(uint32(f), "default", []string{"no-reload", "force-ptx"})
}

// flagString joins the names of the bits set in v (names[i] is bit i); bits without a
// name are shown in hex.
func flagString(v uint32, none string, names []string) string {
	if v == 0 {
		return none
	}
	var parts []string
	for i, n := range names {
		if v&(1<<i) != 0 {
			parts = append(parts, n)
			v &^= 1 << i
		}
	}
	if v != 0 {
		parts = append(parts, "0x"+strconv.FormatUint(uint64(v), 16))
	}
	return strings.Join(parts, "|")
}

// DevicePtr is a device address (CUdeviceptr) passed as a kernel argument.
type DevicePtr uint64

// Param is one kernel parameter's place in the packed parameter buffer.
type Param struct {
	Offset int
	Size   int
}

// KernelAttributes are a kernel's attributes.
type KernelAttributes struct {
	NumRegs               int
	StaticSharedBytes     int
	ConstBytes            int
	LocalBytes            int
	MaxThreadsPerBlock    int
	MaxDynamicSharedBytes int
	PTXVersion            int
	BinaryVersion         int
}

// LaunchConfig is a launch configuration. Zero Grid or Block dimensions mean 1, so the
// zero value is one block of one thread on the legacy default stream.
type LaunchConfig struct {
	Grid        [3]uint32
	Block       [3]uint32
	SharedBytes uint32         // dynamic shared memory
	Stream      unsafe.Pointer // a CUstream / cudaStream_t (C memory); nil = legacy default stream
	Cluster     [3]uint32      // thread-block cluster dims (sm_90+); zero = none
	Cooperative bool
}

// Linear is a 1-D launch of grid blocks of block threads.
func Linear(grid, block uint32) LaunchConfig {
	return LaunchConfig{Grid: [3]uint32{grid, 1, 1}, Block: [3]uint32{block, 1, 1}}
}

// ForElements is a 1-D launch with enough blocks of block threads to cover n elements.
func ForElements(n, block uint32) LaunchConfig {
	if block == 0 {
		block = 1
	}
	grid := (n + block - 1) / block
	if grid == 0 {
		grid = 1
	}
	return Linear(grid, block)
}

func (cfg *LaunchConfig) c() C.kjit_launch_config {
	one := func(v uint32) C.uint32_t {
		if v == 0 {
			return 1
		}
		return C.uint32_t(v)
	}
	var c C.kjit_launch_config
	c.struct_size = C.uint32_t(unsafe.Sizeof(c))
	for i := 0; i < 3; i++ {
		c.grid[i] = one(cfg.Grid[i])
		c.block[i] = one(cfg.Block[i])
		c.cluster[i] = C.uint32_t(cfg.Cluster[i])
	}
	c.shared_bytes = C.uint32_t(cfg.SharedBytes)
	c.stream = cfg.Stream
	c.cooperative = cBool(cfg.Cooperative)
	return c
}

// Kernel is a loaded, launchable kernel. Any number of goroutines may launch one Kernel
// at once; Close it when done (not while launches of it are running).
type Kernel struct {
	h       *C.kjit_kernel
	params  []Param
	bufSize int
}

func newKernel(h *C.kjit_kernel) (*Kernel, error) {
	k := &Kernel{h: h}
	runtime.SetFinalizer(k, (*Kernel).Close)
	n, err := k.ParamCount()
	if err == nil {
		k.params = make([]Param, n)
		for i := range k.params {
			if k.params[i], err = k.ParamInfo(i); err != nil {
				break
			}
		}
	}
	if err == nil {
		k.bufSize, err = k.ParamBufferSize()
	}
	if err != nil {
		k.Close()
		return nil, err
	}
	return k, nil
}

// Close destroys the kernel handle. Closing twice is a no-op.
func (k *Kernel) Close() error {
	if k != nil && k.h != nil {
		C.kjit_kernel_destroy(k.h)
		k.h = nil
		runtime.SetFinalizer(k, nil)
	}
	return nil
}

func (k *Kernel) handle() *C.kjit_kernel {
	if k == nil {
		return nil
	}
	return k.h
}

// LoadPath says how the kernel's code was loaded (-1 for a closed kernel).
func (k *Kernel) LoadPath() LoadPath {
	p := C.kjit_kernel_load_path(k.handle())
	runtime.KeepAlive(k)
	return LoadPath(p)
}

// Symbol is the mangled symbol of the loaded function.
func (k *Kernel) Symbol() string {
	s := C.GoString(C.kjit_kernel_symbol(k.handle()))
	runtime.KeepAlive(k)
	return s
}

// ParamCount is the number of kernel parameters.
func (k *Kernel) ParamCount() (int, error) {
	var n C.size_t
	err := call(func() C.kjit_status { return C.kjit_kernel_param_count(k.handle(), &n) })
	runtime.KeepAlive(k)
	return int(n), err
}

// ParamInfo is the offset and size of parameter index in the packed buffer.
func (k *Kernel) ParamInfo(index int) (Param, error) {
	var off, size C.size_t
	err := call(func() C.kjit_status { return C.kjit_kernel_param_info(k.handle(), C.size_t(index), &off, &size) })
	runtime.KeepAlive(k)
	return Param{Offset: int(off), Size: int(size)}, err
}

// ParamBufferSize is the total size of the packed parameter buffer.
func (k *Kernel) ParamBufferSize() (int, error) {
	var n C.size_t
	err := call(func() C.kjit_status { return C.kjit_kernel_param_buffer_size(k.handle(), &n) })
	runtime.KeepAlive(k)
	return int(n), err
}

// Params is the parameter layout read when the kernel was loaded.
func (k *Kernel) Params() []Param { return append([]Param(nil), k.params...) }

// Attributes reads the kernel's attributes.
func (k *Kernel) Attributes() (KernelAttributes, error) {
	var a C.kjit_kernel_attributes
	a.struct_size = C.uint32_t(unsafe.Sizeof(a))
	err := call(func() C.kjit_status { return C.kjit_kernel_get_attributes(k.handle(), &a) })
	runtime.KeepAlive(k)
	return KernelAttributes{
		NumRegs:               int(a.num_regs),
		StaticSharedBytes:     int(a.static_shared_bytes),
		ConstBytes:            int(a.const_bytes),
		LocalBytes:            int(a.local_bytes),
		MaxThreadsPerBlock:    int(a.max_threads_per_block),
		MaxDynamicSharedBytes: int(a.max_dynamic_shared_bytes),
		PTXVersion:            int(a.ptx_version),
		BinaryVersion:         int(a.binary_version),
	}, err
}

// SetMaxDynamicShared raises the kernel's maximum dynamic shared memory.
func (k *Kernel) SetMaxDynamicShared(bytes int) error {
	err := call(func() C.kjit_status { return C.kjit_kernel_set_max_dynamic_shared(k.handle(), C.int(bytes)) })
	runtime.KeepAlive(k)
	return err
}

// Occupancy is the maximum number of active blocks per SM.
func (k *Kernel) Occupancy(blockSize int, dynamicShared int) (int, error) {
	var n C.int
	err := call(func() C.kjit_status {
		return C.kjit_kernel_occupancy(k.handle(), C.int(blockSize), C.size_t(dynamicShared), &n)
	})
	runtime.KeepAlive(k)
	return int(n), err
}

// SuggestBlockSize is the block size that maximises occupancy and the minimum grid that
// fills the device.
func (k *Kernel) SuggestBlockSize(dynamicShared int) (minGrid, blockSize int, err error) {
	var g, b C.int
	err = call(func() C.kjit_status {
		return C.kjit_kernel_suggest_block_size(k.handle(), C.size_t(dynamicShared), &g, &b)
	})
	runtime.KeepAlive(k)
	return int(g), int(b), err
}

// Pack lays args out in a new packed parameter buffer for LaunchPacked. Each argument
// must have exactly its parameter's size: int8/uint8/bool (1 byte), int16/uint16 (2),
// int32/uint32/float32 (4), int64/uint64/int/uint/uintptr/float64/DevicePtr (8), or a
// []byte holding the parameter's bytes (e.g. a struct passed by value).
func (k *Kernel) Pack(args ...any) ([]byte, error) {
	buf := make([]byte, k.bufSize)
	if err := k.pack(buf, args); err != nil {
		return nil, err
	}
	return buf, nil
}

// packer writes one argument type: its size in the parameter buffer and how its bytes
// are laid out there (little-endian, as on every GPU host kjit supports).
type packer struct {
	size int
	put  func(dst []byte, v any)
}

func typeOf[T any]() reflect.Type { return reflect.TypeOf((*T)(nil)).Elem() }

// typed adapts a put function of one concrete type to the table's signature.
func typed[T any](size int, put func(dst []byte, v T)) packer {
	return packer{size, func(dst []byte, v any) { put(dst, v.(T)) }}
}

var le = binary.LittleEndian

// packers is the table of the argument types Pack accepts (besides []byte, whose size is
// its length). A type not listed here is refused with StatusArgumentMismatch.
var packers = map[reflect.Type]packer{
	typeOf[int8]():  typed(1, func(d []byte, v int8) { d[0] = byte(v) }),
	typeOf[uint8](): typed(1, func(d []byte, v uint8) { d[0] = v }),
	typeOf[bool](): typed(1, func(d []byte, v bool) {
		d[0] = 0
		if v {
			d[0] = 1
		}
	}),
	typeOf[int16]():     typed(2, func(d []byte, v int16) { le.PutUint16(d, uint16(v)) }),
	typeOf[uint16]():    typed(2, func(d []byte, v uint16) { le.PutUint16(d, v) }),
	typeOf[int32]():     typed(4, func(d []byte, v int32) { le.PutUint32(d, uint32(v)) }),
	typeOf[uint32]():    typed(4, func(d []byte, v uint32) { le.PutUint32(d, v) }),
	typeOf[float32]():   typed(4, func(d []byte, v float32) { le.PutUint32(d, math.Float32bits(v)) }),
	typeOf[int64]():     typed(8, func(d []byte, v int64) { le.PutUint64(d, uint64(v)) }),
	typeOf[uint64]():    typed(8, func(d []byte, v uint64) { le.PutUint64(d, v) }),
	typeOf[int]():       typed(8, func(d []byte, v int) { le.PutUint64(d, uint64(v)) }),
	typeOf[uint]():      typed(8, func(d []byte, v uint) { le.PutUint64(d, uint64(v)) }),
	typeOf[uintptr]():   typed(8, func(d []byte, v uintptr) { le.PutUint64(d, uint64(v)) }),
	typeOf[DevicePtr](): typed(8, func(d []byte, v DevicePtr) { le.PutUint64(d, uint64(v)) }),
	typeOf[float64]():   typed(8, func(d []byte, v float64) { le.PutUint64(d, math.Float64bits(v)) }),
}

func (k *Kernel) pack(buf []byte, args []any) error {
	if len(args) != len(k.params) {
		return &Error{Status: StatusArgumentMismatch,
			Message: fmt.Sprintf("kernel %s has %d parameters, %d arguments given", k.Symbol(), len(k.params), len(args))}
	}
	for i, a := range args {
		p := k.params[i]
		dst := buf[p.Offset : p.Offset+p.Size]
		var pk packer
		if raw, ok := a.([]byte); ok {
			pk = packer{len(raw), func(d []byte, _ any) { copy(d, raw) }}
		} else if pk, ok = packers[reflect.TypeOf(a)]; !ok {
			return &Error{Status: StatusArgumentMismatch,
				Message: fmt.Sprintf("argument %d: unsupported type %T", i, a)}
		}
		if pk.size != p.Size {
			return &Error{Status: StatusArgumentMismatch,
				Message: fmt.Sprintf("argument %d: kernel expects %d bytes, %T has %d", i, p.Size, a, pk.size)}
		}
		pk.put(dst, a)
	}
	return nil
}

// Launch packs args (see Pack) and launches asynchronously on cfg.Stream. The device
// memory the kernel uses must stay allocated until the launch completes.
func (k *Kernel) Launch(cfg LaunchConfig, args ...any) error {
	if k.handle() == nil {
		return &Error{Status: StatusInvalidHandle, Message: "kernel is closed"}
	}
	buf := make([]byte, k.bufSize)
	if err := k.pack(buf, args); err != nil {
		return err
	}
	return k.LaunchPacked(cfg, buf)
}

// LaunchPacked launches with one packed parameter buffer laid out by the kernel's
// parameter offsets (see Params); its length must equal ParamBufferSize. The buffer is
// copied before LaunchPacked returns.
func (k *Kernel) LaunchPacked(cfg LaunchConfig, buf []byte) error {
	c := cfg.c()
	var p unsafe.Pointer
	if len(buf) > 0 {
		p = unsafe.Pointer(&buf[0])
	}
	runtime.LockOSThread()
	err := statusError(C.kjit_kernel_launch_packed(k.handle(), &c, p, C.size_t(len(buf))))
	runtime.UnlockOSThread()
	runtime.KeepAlive(k)
	runtime.KeepAlive(buf)
	return err
}
