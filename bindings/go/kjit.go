// Package kjit binds libkjit: compile CUDA C++ at run time with NVRTC, keep the results
// in a cache shared by every thread and process of the machine, and launch kernels.
//
// It is a thin layer over the C API (include/kjit/*.h). Every handle type has a Close
// method; finalizers call it as a safety net only, so close what you open. Errors are
// *Error values carrying the status, the library's message and, for compile errors,
// NVRTC's log; errors.Is(err, kjit.StatusCompile) tests the status.
//
// The library's thread-local error message is read with the goroutine locked to its OS
// thread for the duration of the call, so it always belongs to the call that failed.
package kjit

/*
#cgo pkg-config: kjit
#include <stdlib.h>
#include <kjit/kjit.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"unsafe"
)

// Status is a kjit_status value. It implements error, so a Status can be the target of
// errors.Is.
type Status int

// Status values (stable numbers, see include/kjit/common.h).
const (
	StatusOK                Status = 0
	StatusInvalidArgument   Status = 1
	StatusInvalidHandle     Status = 2
	StatusOutOfMemory       Status = 3
	StatusInvalidSource     Status = 4
	StatusCompile           Status = 5
	StatusInvalidOption     Status = 6
	StatusUnsupportedTarget Status = 7
	StatusNameNotFound      Status = 8
	StatusNVRTC             Status = 9
	StatusCache             Status = 10
	StatusCacheCorrupt      Status = 11
	StatusNotFound          Status = 12
	StatusReadOnly          Status = 13
	StatusCUDAUnavailable   Status = 14
	StatusCUDA              Status = 15
	StatusArgumentMismatch  Status = 16
	StatusStaleHandle       Status = 17
	StatusCUDASticky        Status = 18
	StatusUnsupported       Status = 19
	StatusCancelled         Status = 20
	StatusTimeout           Status = 21
	StatusBufferTooSmall    Status = 22
	StatusCUBLAS            Status = 23
	StatusIO                Status = 24
	StatusInternal          Status = 99
)

// Error returns the library's name of the status, e.g.
// "KJIT_ERROR_COMPILE: compilation failed".
func (s Status) Error() string { return C.GoString(C.kjit_status_string(C.int(s))) }

// String is the same as Error.
func (s Status) String() string { return s.Error() }

// Error is the error of every failed call.
type Error struct {
	Status  Status
	Message string // what failed, with which input, and why (may be empty)
	Log     string // NVRTC's log for compile errors, else ""
	cause   error  // the context's error when a context ended the call (CompileContext)
}

func (e *Error) Error() string {
	s := e.Status.Error()
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Log != "" {
		s += "\n" + strings.TrimRight(e.Log, "\n")
	}
	return s
}

// Unwrap returns the Status, so errors.Is(err, kjit.StatusCompile) works.
func (e *Error) Unwrap() error { return e.Status }

// Is reports whether target is an *Error with the same status, or the error of the
// context that ended the call (context.Canceled, context.DeadlineExceeded).
func (e *Error) Is(target error) bool {
	if e.cause != nil && errors.Is(e.cause, target) {
		return true
	}
	t, ok := target.(*Error)
	return ok && t.Status == e.Status
}

// statusError turns a status into an error. It must run on the OS thread that made the
// call (see call), because kjit_last_error() is thread-local.
func statusError(st C.kjit_status) error {
	if st == C.KJIT_OK {
		return nil
	}
	return &Error{Status: Status(st), Message: C.GoString(C.kjit_last_error())}
}

// call runs one kjit call with the goroutine locked to its OS thread and reads the
// thread-local message of a failure before unlocking.
func call(f func() C.kjit_status) error {
	runtime.LockOSThread()
	err := statusError(f())
	runtime.UnlockOSThread()
	return err
}

// ModulePath is this module's import path: what `go get` resolves once the repository is
// public, and what a `replace` directive maps to a checkout (see README.md).
const ModulePath = "github.com/kjit-dev/kjit/bindings/go"

// Version is the run-time library version, major*10000 + minor*100 + patch.
func Version() int { return int(C.kjit_version()) }

// VersionString is the run-time library version as "major.minor.patch".
func VersionString() string { return C.GoString(C.kjit_version_string()) }

// HeaderVersion is the version of the headers these bindings were compiled against.
const HeaderVersion = C.KJIT_VERSION

// NVRTCVersion is the NVRTC in use, e.g. "13.0.88 (CL-36424714)".
func NVRTCVersion() (string, error) {
	var p *C.char
	if err := call(func() C.kjit_status { return C.kjit_nvrtc_version(&p) }); err != nil {
		return "", err
	}
	return C.GoString(p), nil
}

// HashSource is the SHA-256 of data as 64 lowercase hex digits.
func HashSource(data []byte) (string, error) {
	var out [65]C.char
	var p *C.char
	if len(data) > 0 {
		p = (*C.char)(unsafe.Pointer(&data[0]))
	} else {
		p = (*C.char)(unsafe.Pointer(&out[0])) // any non-NULL pointer for zero bytes
	}
	err := call(func() C.kjit_status { return C.kjit_hash_source(p, C.size_t(len(data)), &out[0]) })
	if err != nil {
		return "", err
	}
	return C.GoString(&out[0]), nil
}

// HashOptions is the SHA-256 over a length-prefixed, order-sensitive encoding of options.
func HashOptions(options []string) (string, error) {
	arr, free, err := cStringArray("option", options, StatusInvalidArgument)
	if err != nil {
		return "", err
	}
	defer free()
	var out [65]C.char
	err = call(func() C.kjit_status { return C.kjit_hash_options(arr, C.size_t(len(options)), &out[0]) })
	if err != nil {
		return "", err
	}
	return C.GoString(&out[0]), nil
}

// ComputeKey is the cache key Compile would use for (source, opts), without compiling.
// opts may be nil.
func ComputeKey(source string, opts *Options) (string, error) {
	oh, err := optsHandle(opts)
	if err != nil {
		return "", err
	}
	src, err := cString("source", source, StatusInvalidSource)
	if err != nil {
		return "", err
	}
	defer C.free(unsafe.Pointer(src))
	var out [65]C.char
	err = call(func() C.kjit_status { return C.kjit_compute_key(src, oh, &out[0]) })
	runtime.KeepAlive(opts)
	if err != nil {
		return "", err
	}
	return C.GoString(&out[0]), nil
}

// cString copies user text into C memory for one call; the caller frees it with C.free.
// Every string the bindings hand to C goes through here. A Go string may hold a NUL byte,
// which C would read as its end (C.CString would silently cut the text there), so such
// text is refused before any C call: code (a source, header contents) with
// StatusInvalidSource, anything else with StatusInvalidArgument (the statuses the
// library gives such text when it is not valid UTF-8).
func cString(what, s string, status Status) (*C.char, error) {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return nil, &Error{Status: status, Message: fmt.Sprintf("%s contains a NUL byte (byte %d)", what, i)}
	}
	return C.CString(s), nil
}

// cStringArray copies strs into C memory with cString: a C array of C strings (never Go
// pointers). The caller calls free.
func cStringArray(what string, strs []string, status Status) (arr **C.char, free func(), err error) {
	n := len(strs)
	if n == 0 {
		n = 1
	}
	s := unsafe.Slice((**C.char)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof((*C.char)(nil))))), n)
	free = func() {
		for _, p := range s {
			C.free(unsafe.Pointer(p)) // entries not filled are NULL
		}
		C.free(unsafe.Pointer(&s[0]))
	}
	for i, str := range strs {
		if s[i], err = cString(what, str, status); err != nil {
			free()
			return nil, nil, err
		}
	}
	return &s[0], free, nil
}

// ---- devices ----------------------------------------------------------------------------

// DeviceCount is the number of CUDA devices; an error with StatusCUDAUnavailable without
// a driver.
func DeviceCount() (int, error) {
	var n C.int
	err := call(func() C.kjit_status { return C.kjit_device_count(&n) })
	return int(n), err
}

// DeviceArch is a device's exact architecture as an NVRTC target, e.g. "sm_90".
func DeviceArch(device int) (string, error) {
	var buf [256]C.char
	err := call(func() C.kjit_status { return C.kjit_device_arch(C.int(device), &buf[0], C.size_t(len(buf))) })
	if err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

// DeviceName is a device's name, e.g. "NVIDIA H200".
func DeviceName(device int) (string, error) {
	var buf [256]C.char
	err := call(func() C.kjit_status { return C.kjit_device_name(C.int(device), &buf[0], C.size_t(len(buf))) })
	if err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

// DriverVersion is the CUDA driver version, e.g. 13000.
func DriverVersion() (int, error) {
	var v C.int
	err := call(func() C.kjit_status { return C.kjit_driver_version(&v) })
	return int(v), err
}
