package kjit

/*
#include <stdlib.h>
#include <kjit/kjit.h>
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

// Compiler is the NVRTC front end. Safe for concurrent use; Close it when done.
type Compiler struct {
	h     *C.kjit_compiler
	cache *Cache // keeps the cache reachable (and open) while the compiler lives
}

// NewCompiler creates a compiler; with a non-nil cache every compile goes through it.
// threads bounds the worker pool of CompileAsync/CompileMany (0 = CPU cores).
func NewCompiler(cache *Cache, threads uint) (*Compiler, error) {
	if cache != nil && cache.h == nil {
		return nil, &Error{Status: StatusInvalidHandle, Message: "cache is closed"}
	}
	var h *C.kjit_compiler
	err := call(func() C.kjit_status { return C.kjit_compiler_create(cache.handle(), C.uint(threads), &h) })
	runtime.KeepAlive(cache)
	if err != nil {
		return nil, err
	}
	c := &Compiler{h: h, cache: cache}
	if cache != nil {
		atomic.AddInt32(&cache.users, 1)
	}
	runtime.SetFinalizer(c, (*Compiler).Close)
	return c, nil
}

// Close destroys the compiler, waiting for its pending async compiles. Closing twice is a
// no-op. Close must not race with other calls on the same compiler.
func (c *Compiler) Close() error {
	if c == nil || c.h == nil {
		return nil
	}
	C.kjit_compiler_destroy(c.h)
	c.h = nil
	if c.cache != nil {
		atomic.AddInt32(&c.cache.users, -1)
		c.cache = nil
	}
	runtime.SetFinalizer(c, nil)
	return nil
}

func (c *Compiler) handle() *C.kjit_compiler {
	if c == nil {
		return nil
	}
	return c.h
}

// compileResult wraps a compile's outcome: on KJIT_ERROR_COMPILE the binary holding the
// log is read into the error and freed.
func compileResult(err error, out *C.kjit_binary) (*Binary, error) {
	if err == nil {
		return newBinary(out), nil
	}
	if out != nil {
		if e, ok := err.(*Error); ok {
			e.Log = C.GoString(C.kjit_binary_log(out))
		}
		C.kjit_binary_destroy(out)
	}
	return nil, err
}

// Compile compiles source (or hits the cache); opts may be nil. A compile error is an
// *Error with StatusCompile and NVRTC's log in Log.
func (c *Compiler) Compile(source string, opts *Options) (*Binary, error) {
	oh, err := optsHandle(opts)
	if err != nil {
		return nil, err
	}
	src, err := cString("source", source, StatusInvalidSource)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(src))
	var out *C.kjit_binary
	err = call(func() C.kjit_status { return C.kjit_compile(c.handle(), src, oh, &out) })
	runtime.KeepAlive(c)
	runtime.KeepAlive(opts)
	return compileResult(err, out)
}

// Future is a compile running on the compiler's worker pool.
type Future struct {
	h *C.kjit_future
}

// CompileAsync starts a compile on the worker pool and returns at once.
func (c *Compiler) CompileAsync(source string, opts *Options) (*Future, error) {
	oh, err := optsHandle(opts)
	if err != nil {
		return nil, err
	}
	src, err := cString("source", source, StatusInvalidSource)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(src))
	var out *C.kjit_future
	err = call(func() C.kjit_status { return C.kjit_compile_async(c.handle(), src, oh, &out) })
	runtime.KeepAlive(c)
	runtime.KeepAlive(opts)
	if err != nil {
		return nil, err
	}
	f := &Future{h: out}
	runtime.SetFinalizer(f, (*Future).Close)
	return f, nil
}

// Wait waits up to timeout (negative = forever, 0 = poll) and returns what Compile
// would have. StatusTimeout when not done yet; the result can be taken once. One
// waiter at a time.
func (f *Future) Wait(timeout time.Duration) (*Binary, error) {
	ms := int64(-1)
	if timeout >= 0 {
		ms = timeout.Milliseconds()
	}
	var out *C.kjit_binary
	err := call(func() C.kjit_status { return C.kjit_future_wait(f.handle(), C.int64_t(ms), &out) })
	runtime.KeepAlive(f)
	return compileResult(err, out)
}

// Ready reports whether Wait would not block.
func (f *Future) Ready() bool {
	r := C.kjit_future_ready(f.handle())
	runtime.KeepAlive(f)
	return r == 1
}

// Cancel asks the compile to stop.
func (f *Future) Cancel() error {
	err := call(func() C.kjit_status { return C.kjit_future_cancel(f.handle()) })
	runtime.KeepAlive(f)
	return err
}

// Close frees the future, cancelling a compile that is still running.
func (f *Future) Close() error {
	if f != nil && f.h != nil {
		C.kjit_future_destroy(f.h)
		f.h = nil
		runtime.SetFinalizer(f, nil)
	}
	return nil
}

func (f *Future) handle() *C.kjit_future {
	if f == nil {
		return nil
	}
	return f.h
}

// CompileMany compiles sources in parallel and waits for all. opts is nil (defaults for
// all) or has one entry per source (entries may be nil). It returns one binary and one
// error per source; the returned error is non-nil only for argument errors detected
// before anything ran.
func (c *Compiler) CompileMany(sources []string, opts []*Options) ([]*Binary, []error, error) {
	n := len(sources)
	if opts != nil && len(opts) != n {
		return nil, nil, &Error{Status: StatusInvalidArgument,
			Message: fmt.Sprintf("%d sources but %d options", n, len(opts))}
	}
	if n == 0 {
		return nil, nil, nil
	}
	srcs, freeSrcs, err := cStringArray("source", sources, StatusInvalidSource)
	if err != nil {
		return nil, nil, err
	}
	defer freeSrcs()
	// C arrays, so that no Go memory holding pointers is passed to C.
	ptrSize := C.size_t(unsafe.Sizeof(uintptr(0)))
	var optArr **C.kjit_options
	if opts != nil {
		optArr = (**C.kjit_options)(C.calloc(C.size_t(n), ptrSize))
		defer C.free(unsafe.Pointer(optArr))
		s := unsafe.Slice(optArr, n)
		for i, o := range opts {
			h, err := optsHandle(o)
			if err != nil {
				return nil, nil, err
			}
			s[i] = h
		}
	}
	outs := (**C.kjit_binary)(C.calloc(C.size_t(n), ptrSize))
	defer C.free(unsafe.Pointer(outs))
	statuses := (*C.kjit_status)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.kjit_status(0)))))
	defer C.free(unsafe.Pointer(statuses))

	runtime.LockOSThread()
	st := C.kjit_compile_many(c.handle(), C.size_t(n), srcs, (**C.kjit_options)(unsafe.Pointer(optArr)), outs, statuses)
	msg := C.GoString(C.kjit_last_error())
	runtime.UnlockOSThread()
	runtime.KeepAlive(c)
	runtime.KeepAlive(opts)

	outSlice := unsafe.Slice(outs, n)
	stSlice := unsafe.Slice(statuses, n)
	bins := make([]*Binary, n)
	errs := make([]error, n)
	anyItem := false
	for i := 0; i < n; i++ {
		if stSlice[i] != C.KJIT_OK || outSlice[i] != nil {
			anyItem = true
		}
	}
	if st != C.KJIT_OK && !anyItem {
		return nil, nil, &Error{Status: Status(st), Message: msg}
	}
	first := true
	for i := 0; i < n; i++ {
		if stSlice[i] == C.KJIT_OK {
			bins[i] = newBinary(outSlice[i])
			continue
		}
		e := &Error{Status: Status(stSlice[i])}
		if first { // the message belongs to the first failed item
			e.Message = msg
			first = false
		}
		_, errs[i] = compileResult(e, outSlice[i])
	}
	return bins, errs, nil
}

// Kernel compiles-or-hits source for device and loads the kernel called name (an extern
// "C" name, a mangled name, or a name expression). opts may be nil.
func (c *Compiler) Kernel(source, name string, opts *Options, device int, flags KernelFlags) (*Kernel, error) {
	oh, err := optsHandle(opts)
	if err != nil {
		return nil, err
	}
	src, err := cString("source", source, StatusInvalidSource)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(src))
	nm, err := cString("kernel name", name, StatusInvalidArgument)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(nm))
	var out *C.kjit_kernel
	var log *C.kjit_binary
	err = call(func() C.kjit_status {
		return C.kjit_kernel_create(c.handle(), src, nm, oh, C.int(device), C.uint(flags), &out, &log)
	})
	runtime.KeepAlive(c)
	runtime.KeepAlive(opts)
	if err != nil {
		_, err = compileResult(err, log)
		return nil, err
	}
	if log != nil {
		C.kjit_binary_destroy(log)
	}
	return newKernel(out)
}
