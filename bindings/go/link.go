package kjit

/*
#include <stdlib.h>
#include <kjit/kjit.h>
*/
import "C"

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Status values of the link step (include/kjit/common.h).
const (
	StatusLink      Status = 25 // nvJitLink reported a link error; Error.Log has its log
	StatusNVJitLink Status = 26 // nvJitLink not available, or failed internally
)

// LinkInput is a kind of link input (kjit_link_input).
type LinkInput int

// Link input kinds.
const (
	LinkInputAuto    LinkInput = 0 // files only: from the extension (.cubin .ptx .ltoir .fatbin .o .a)
	LinkInputCUBIN   LinkInput = 1 // relocatable CUBIN (-rdc=true)
	LinkInputPTX     LinkInput = 2 // PTX text (-rdc=true)
	LinkInputLTOIR   LinkInput = 3 // LTO-IR (OutputLTOIR); link with "-lto"
	LinkInputFatbin  LinkInput = 4 // fatbinary
	LinkInputObject  LinkInput = 5 // host object file with device code
	LinkInputLibrary LinkInput = 6 // static library of such objects
)

// Linker links kjit binaries and device code from elsewhere with nvJitLink, through the
// cache when it has one (a hit does not run nvJitLink). Link may be called from several
// goroutines at once; the Add and Set methods must not race with other calls. Close it
// when done.
type Linker struct {
	h     *C.kjit_linker
	cache *Cache
}

// NewLinker creates a linker; with a non-nil cache every Link goes through it.
func NewLinker(cache *Cache) (*Linker, error) {
	if cache != nil && cache.h == nil {
		return nil, &Error{Status: StatusInvalidHandle, Message: "cache is closed"}
	}
	var h *C.kjit_linker
	err := call(func() C.kjit_status { return C.kjit_linker_create(cache.handle(), &h) })
	runtime.KeepAlive(cache)
	if err != nil {
		return nil, err
	}
	l := &Linker{h: h, cache: cache}
	if cache != nil {
		atomic.AddInt32(&cache.users, 1)
	}
	runtime.SetFinalizer(l, (*Linker).Close)
	return l, nil
}

// Close destroys the linker; binaries it produced stay valid. Closing twice is a no-op.
func (l *Linker) Close() error {
	if l == nil || l.h == nil {
		return nil
	}
	C.kjit_linker_destroy(l.h)
	l.h = nil
	if l.cache != nil {
		atomic.AddInt32(&l.cache.users, -1)
		l.cache = nil
	}
	runtime.SetFinalizer(l, nil)
	return nil
}

func (l *Linker) handle() *C.kjit_linker {
	if l == nil {
		return nil
	}
	return l.h
}

func (l *Linker) withString(what, s string, f func(*C.kjit_linker, *C.char) C.kjit_status) error {
	cs, err := cString(what, s, StatusInvalidArgument)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(cs))
	err = call(func() C.kjit_status { return f(l.handle(), cs) })
	runtime.KeepAlive(l)
	return err
}

// SetTarget sets "sm_90", "sm_90a", ... or "auto" (device 0). Without one the target of
// the first binary added is used.
func (l *Linker) SetTarget(target string) error {
	return l.withString("target", target, func(h *C.kjit_linker, s *C.char) C.kjit_status {
		return C.kjit_linker_set_target(h, s)
	})
}

// AddOption appends one nvJitLink option: "-lto", "-O3", "-maxrregcount=64", "-ftz=1"...
func (l *Linker) AddOption(option string) error {
	return l.withString("option", option, func(h *C.kjit_linker, s *C.char) C.kjit_status {
		return C.kjit_linker_add_option(h, s)
	})
}

// SetOutputs chooses OutputCUBIN (the default) and/or OutputPTX (needs "-lto").
func (l *Linker) SetOutputs(outputs Outputs) error {
	err := call(func() C.kjit_status { return C.kjit_linker_set_outputs(l.handle(), C.uint(outputs)) })
	runtime.KeepAlive(l)
	return err
}

// AddBinary adds a compile or link result: its LTO-IR, else its CUBIN for the link's
// architecture, else its PTX. name labels it in nvJitLink's log ("" = its program name).
func (l *Linker) AddBinary(b *Binary, name string) error {
	var cn *C.char
	if name != "" {
		var err error
		if cn, err = cString("name", name, StatusInvalidArgument); err != nil {
			return err
		}
		defer C.free(unsafe.Pointer(cn))
	}
	err := call(func() C.kjit_status { return C.kjit_linker_add_binary(l.handle(), b.handle(), cn) })
	runtime.KeepAlive(l)
	runtime.KeepAlive(b)
	return err
}

// AddData adds bytes of one kind (not LinkInputAuto); they are copied.
func (l *Linker) AddData(kind LinkInput, data []byte, name string) error {
	cn, err := cString("name", name, StatusInvalidArgument)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(cn))
	var p unsafe.Pointer
	if len(data) > 0 {
		p = C.CBytes(data) // C memory: cgo forbids handing over Go memory for the call's length
		defer C.free(p)
	}
	err = call(func() C.kjit_status {
		return C.kjit_linker_add_data(l.handle(), C.int(kind), p, C.size_t(len(data)), cn)
	})
	runtime.KeepAlive(l)
	return err
}

// AddFile adds the file at path, read now; LinkInputAuto takes the kind from its extension.
func (l *Linker) AddFile(kind LinkInput, path string) error {
	return l.withString("path", path, func(h *C.kjit_linker, s *C.char) C.kjit_status {
		return C.kjit_linker_add_file(h, C.int(kind), s)
	})
}

// Link links the inputs (or hits the cache). A failure nvJitLink reports (StatusLink for
// undefined or duplicate symbols and unreadable inputs, StatusUnsupportedTarget,
// StatusInvalidOption) is an *Error whose Log is nvJitLink's log.
func (l *Linker) Link() (*Binary, error) {
	var out *C.kjit_binary
	err := call(func() C.kjit_status { return C.kjit_link(l.handle(), &out) })
	runtime.KeepAlive(l)
	if err == nil {
		return newBinary(out), nil
	}
	if out != nil {
		if e, ok := err.(*Error); ok {
			e.Log = C.GoString(C.kjit_binary_log(out))
			if i := indexNewline(e.Message); e.Log != "" && i >= 0 {
				e.Message = e.Message[:i] // the log follows in Log
			}
		}
		C.kjit_binary_destroy(out)
	}
	return nil, err
}

// Key is the cache key Link would use (64 hex digits), without linking.
func (l *Linker) Key() (string, error) {
	buf := (*C.char)(C.malloc(65))
	defer C.free(unsafe.Pointer(buf))
	err := call(func() C.kjit_status { return C.kjit_linker_key(l.handle(), buf) })
	runtime.KeepAlive(l)
	if err != nil {
		return "", err
	}
	return C.GoString(buf), nil
}

// NVJitLinkVersion is the nvJitLink in use, e.g. "nvJitLink 13.0 build-id:157d67e6...".
func NVJitLinkVersion() (string, error) {
	var p *C.char
	err := call(func() C.kjit_status { return C.kjit_nvjitlink_version(&p) })
	if err != nil {
		return "", err
	}
	return C.GoString(p), nil
}

func indexNewline(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return i
		}
	}
	return -1
}
