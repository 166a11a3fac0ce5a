package kjit

// Functions called from C. A file with //export may only declare things in its preamble.

/*
#include <kjit/kjit.h>
*/
import "C"

import (
	"runtime/cgo"
	"strings"
	"unsafe"
)

//export kjitgoLog
func kjitgoLog(level C.int, message *C.char, user unsafe.Pointer) {
	h, _ := logCallback.Load().(logHolder)
	if h.f != nil {
		h.f(LogLevel(level), C.GoString(message))
	}
}

//export kjitgoCacheListEntry
func kjitgoCacheListEntry(info *C.kjit_cache_entry_info, user unsafe.Pointer) C.int {
	entries := cgo.Handle(uintptr(user)).Value().(*[]CacheEntry)
	kernels := C.GoString(info.kernels)
	e := CacheEntry{
		Key:       C.GoString(info.key),
		Target:    C.GoString(info.target),
		Bytes:     uint64(info.bytes),
		Created:   int64(info.created),
		LastUsed:  int64(info.last_used),
		CompileMS: float64(info.compile_ms),
	}
	if kernels != "" {
		e.Kernels = strings.Split(kernels, ",")
	}
	*entries = append(*entries, e)
	return 0
}
