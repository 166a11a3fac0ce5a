package kjit

/*
#include <stdlib.h>
#include <kjit/kjit.h>
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// Outputs is a bit mask of compile outputs.
type Outputs uint32

// Compile outputs.
const (
	OutputDefault Outputs = 0
	OutputPTX     Outputs = 1
	OutputCUBIN   Outputs = 2
	OutputLTOIR   Outputs = 4
)

// String lists the outputs, e.g. "ptx|cubin"; "default" for none.
func (o Outputs) String() string {
	return flagString(uint32(o), "default", []string{"ptx", "cubin", "ltoir"})
}

// Options is a compile options builder. Any number of concurrent compiles may use one
// Options, but it must not be changed while they run.
type Options struct {
	h *C.kjit_options
}

// NewOptions creates an empty builder: target "auto", default outputs, name "kernel.cu".
func NewOptions() (*Options, error) {
	var h *C.kjit_options
	if err := call(func() C.kjit_status { return C.kjit_options_create(&h) }); err != nil {
		return nil, err
	}
	return wrapOptions(h), nil
}

func wrapOptions(h *C.kjit_options) *Options {
	o := &Options{h: h}
	runtime.SetFinalizer(o, (*Options).Close)
	return o
}

// Clone returns a deep copy.
func (o *Options) Clone() (*Options, error) {
	var h *C.kjit_options
	err := call(func() C.kjit_status { return C.kjit_options_clone(o.handle(), &h) })
	runtime.KeepAlive(o)
	if err != nil {
		return nil, err
	}
	return wrapOptions(h), nil
}

// Close frees the builder. Closing twice is a no-op.
func (o *Options) Close() error {
	if o != nil && o.h != nil {
		C.kjit_options_destroy(o.h)
		o.h = nil
		runtime.SetFinalizer(o, nil)
	}
	return nil
}

func (o *Options) handle() *C.kjit_options {
	if o == nil {
		return nil
	}
	return o.h
}

// optsHandle is the handle to pass for an optional *Options: NULL (defaults) for nil, an
// error for closed options (passing NULL would silently compile with the defaults).
func optsHandle(o *Options) (*C.kjit_options, error) {
	if o == nil {
		return nil, nil
	}
	if o.h == nil {
		return nil, &Error{Status: StatusInvalidHandle, Message: "options are closed"}
	}
	return o.h, nil
}

func (o *Options) withString(what, s string, f func(*C.kjit_options, *C.char) C.kjit_status) error {
	cs, err := cString(what, s, StatusInvalidArgument)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(cs))
	err = call(func() C.kjit_status { return f(o.handle(), cs) })
	runtime.KeepAlive(o)
	return err
}

// SetTarget sets "sm_90", "sm_90a", "compute_90" (PTX only) or "auto".
func (o *Options) SetTarget(target string) error {
	return o.withString("target", target, func(h *C.kjit_options, s *C.char) C.kjit_status {
		return C.kjit_options_set_target(h, s)
	})
}

// SetDevice sets the device whose architecture target "auto" resolves to (default 0).
func (o *Options) SetDevice(device int) error {
	err := call(func() C.kjit_status { return C.kjit_options_set_device(o.handle(), C.int(device)) })
	runtime.KeepAlive(o)
	return err
}

// SetOutputs selects the outputs (OutputDefault = the library's defaults).
func (o *Options) SetOutputs(outputs Outputs) error {
	err := call(func() C.kjit_status { return C.kjit_options_set_outputs(o.handle(), C.uint(outputs)) })
	runtime.KeepAlive(o)
	return err
}

// SetName sets the program name (appears in the log and __FILE__).
func (o *Options) SetName(name string) error {
	return o.withString("program name", name, func(h *C.kjit_options, s *C.char) C.kjit_status {
		return C.kjit_options_set_name(h, s)
	})
}

// SetToolkit chooses the CUDA toolkit whose headers (<cuda_fp16.h>, <cub/...> ...) NVRTC
// finds without an include option: "" turns them off, a path names a toolkit root.
// UseDefaultToolkit goes back to finding it automatically (the default).
func (o *Options) SetToolkit(root string) error {
	return o.withString("toolkit root", root, func(h *C.kjit_options, s *C.char) C.kjit_status {
		return C.kjit_options_set_toolkit(h, s)
	})
}

// UseDefaultToolkit finds the CUDA toolkit automatically (the default).
func (o *Options) UseDefaultToolkit() error {
	err := call(func() C.kjit_status { return C.kjit_options_set_toolkit(o.handle(), nil) })
	runtime.KeepAlive(o)
	return err
}

// SetPCH turns automatic precompiled headers on or off (default on; results are
// byte-identical either way).
func (o *Options) SetPCH(enabled bool) error {
	v := C.int(0)
	if enabled {
		v = 1
	}
	err := call(func() C.kjit_status { return C.kjit_options_set_pch(o.handle(), v) })
	runtime.KeepAlive(o)
	return err
}

// Add appends one raw NVRTC option, e.g. "-std=c++17". "--no-builtin-std" is kjit's own:
// it turns off the built-in standard headers (<cstdint>, <cmath> ...).
func (o *Options) Add(option string) error {
	return o.withString("option", option, func(h *C.kjit_options, s *C.char) C.kjit_status {
		return C.kjit_options_add(h, s)
	})
}

// AddDefine appends "-D<name>=<value>", or "-D<name>" when value is "" (use
// Add("-DNAME=") for a macro defined as empty).
func (o *Options) AddDefine(name, value string) error {
	n, err := cString("define name", name, StatusInvalidArgument)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(n))
	var v *C.char
	if value != "" {
		if v, err = cString("define value", value, StatusInvalidArgument); err != nil {
			return err
		}
		defer C.free(unsafe.Pointer(v))
	}
	err = call(func() C.kjit_status { return C.kjit_options_add_define(o.handle(), n, v) })
	runtime.KeepAlive(o)
	return err
}

// AddIncludePath appends "-I<path>"; files reachable through it are hashed into the
// cache key.
func (o *Options) AddIncludePath(path string) error {
	return o.withString("include path", path, func(h *C.kjit_options, s *C.char) C.kjit_status {
		return C.kjit_options_add_include_path(h, s)
	})
}

// AddHeader adds an in-memory header: #include "<name>" resolves to contents.
func (o *Options) AddHeader(name, contents string) error {
	n, err := cString("header name", name, StatusInvalidArgument)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(n))
	c, err := cString("header contents", contents, StatusInvalidSource)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(c))
	err = call(func() C.kjit_status { return C.kjit_options_add_header(o.handle(), n, c) })
	runtime.KeepAlive(o)
	return err
}

// AddNameExpression adds a name expression, e.g. "my_kernel<float, 256>".
func (o *Options) AddNameExpression(expr string) error {
	return o.withString("name expression", expr, func(h *C.kjit_options, s *C.char) C.kjit_status {
		return C.kjit_options_add_name_expression(h, s)
	})
}
