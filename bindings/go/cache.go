package kjit

/*
#include <stdint.h>
#include <stdlib.h>
#include <kjit/kjit.h>
extern int kjitgoCacheListEntry(kjit_cache_entry_info* info, void* user);
static kjit_status kjitgo_cache_list(kjit_cache* cache, uintptr_t handle) {
  return kjit_cache_list(cache, (kjit_cache_list_fn)kjitgoCacheListEntry, (void*)handle);
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"runtime/cgo"
	"strconv"
	"sync/atomic"
	"unsafe"
)

// CacheOptions are the options of OpenCache. The zero value means the library's
// defaults.
type CacheOptions struct {
	// Dir is the cache directory; "" = $KJIT_CACHE_DIR, else $XDG_CACHE_HOME/kjit, else
	// ~/.cache/kjit, else the temp dir.
	Dir string
	// MaxSizeBytes bounds the disk tier; 0 = default (1 GiB or $KJIT_CACHE_MAX_SIZE).
	MaxSizeBytes uint64
	// MemoryMaxBytes bounds the memory tier; 0 = default (64 MiB).
	MemoryMaxBytes uint64
	// ReadOnly never writes the disk tier.
	ReadOnly bool
	// MemoryOnly has no disk tier at all.
	MemoryOnly bool
	// RemoteURL is the fleet tier: "redis://host:port[/db]" or "unix:///path/redis.sock";
	// "" = $KJIT_REMOTE (unset = none). Never required: failures are counted and logged.
	RemoteURL string
	// RemoteReadOnly never writes to the remote tier.
	RemoteReadOnly bool
}

// DiskState is the state of a cache's disk tier.
type DiskState int

// Disk tier states.
const (
	DiskOK          DiskState = 0
	DiskReadOnly    DiskState = 1
	DiskDisabled    DiskState = 2
	DiskUnavailable DiskState = 3
)

// String names the state as `kjit cache stats` does: "ok", "read-only", "disabled",
// "unavailable" (DiskState(N) for a value this version does not know).
func (d DiskState) String() string {
	switch d {
	case DiskOK:
		return "ok"
	case DiskReadOnly:
		return "read-only"
	case DiskDisabled:
		return "disabled"
	case DiskUnavailable:
		return "unavailable"
	}
	return "DiskState(" + strconv.Itoa(int(d)) + ")"
}

// CacheStats are the counters and sizes of a cache handle. The counters count what this
// handle did since it was opened; the Total* fields count every process that has used the
// cache database, this one included (each handle adds its counts to the database when it
// stores an entry and when it closes).
type CacheStats struct {
	DiskState      DiskState
	MemoryHits     uint64
	DiskHits       uint64
	RemoteHits     uint64
	Misses         uint64
	Compiles       uint64
	Stores         uint64
	StoreFailures  uint64
	CorruptEntries uint64
	Evictions      uint64
	Waits          uint64
	CompileMSSaved float64
	MemoryEntries  uint64
	MemoryBytes    uint64
	DiskEntries    uint64
	DiskBytes      uint64
	MaxSizeBytes   uint64
	RemoteErrors   uint64
	RemoteTimeouts uint64
	Message        string // why the disk tier is not OK, or ""
	// NotStored counts compiles whose result was not stored because NVRTC read a file the
	// cache key does not cover (the log says which); the caller still got the result.
	// Such a program is compiled again on every request.
	NotStored uint64
	// PchCreated, PchUsed and PchFailed count compiles that created a precompiled header,
	// used one, or could not make one (they still compiled, without it).
	PchCreated uint64
	PchUsed    uint64
	PchFailed  uint64
	// RemoteClaims counts keys this handle claimed in the remote tier and compiled for the
	// fleet; RemoteClaimWaits misses that waited on another node's claim, of which
	// RemoteClaimWaitHits ended with that node's entry and RemoteClaimWaitTimeouts reached
	// the deadline (the handle then compiled itself).
	RemoteClaims            uint64
	RemoteClaimWaits        uint64
	RemoteClaimWaitHits     uint64
	RemoteClaimWaitTimeouts uint64

	TotalMemoryHits              uint64
	TotalDiskHits                uint64
	TotalRemoteHits              uint64
	TotalMisses                  uint64
	TotalCompiles                uint64
	TotalCorruptEntries          uint64
	TotalEvictions               uint64
	TotalRemoteErrors            uint64
	TotalRemoteTimeouts          uint64
	TotalCompileMSSaved          float64
	TotalNotStored               uint64
	TotalPchCreated              uint64
	TotalPchUsed                 uint64
	TotalPchFailed               uint64
	TotalRemoteClaims            uint64
	TotalRemoteClaimWaits        uint64
	TotalRemoteClaimWaitHits     uint64
	TotalRemoteClaimWaitTimeouts uint64
}

// CacheEntry is one disk entry as listed by (*Cache).List.
type CacheEntry struct {
	Key       string
	Target    string
	Kernels   []string
	Bytes     uint64
	Created   int64 // unix seconds
	LastUsed  int64 // unix seconds, updated coarsely
	CompileMS float64
}

// Cache is the persistent kernel cache: a memory tier over one SQLite database shared by
// every thread and process of the machine. Safe for concurrent use; Close it when done,
// after closing every Compiler that uses it.
type Cache struct {
	h     *C.kjit_cache
	users int32 // open compilers bound to this cache
}

// OpenCache opens a cache; opts may be nil. It does not fail because of the disk: an
// unusable directory gives a memory-only cache whose Stats say why.
func OpenCache(opts *CacheOptions) (*Cache, error) {
	// The library's defaults, written within the struct these bindings know (struct_size
	// says which fields that is).
	var o C.kjit_cache_options
	if err := call(func() C.kjit_status {
		return C.kjit_cache_options_init_sized(&o, C.size_t(unsafe.Sizeof(o)))
	}); err != nil {
		return nil, err
	}
	if opts != nil {
		if opts.Dir != "" {
			d, err := cString("cache directory", opts.Dir, StatusInvalidArgument)
			if err != nil {
				return nil, err
			}
			defer C.free(unsafe.Pointer(d))
			o.directory = d
		}
		o.max_size_bytes = C.uint64_t(opts.MaxSizeBytes)
		o.memory_max_bytes = C.uint64_t(opts.MemoryMaxBytes)
		o.read_only = cBool(opts.ReadOnly)
		o.memory_only = cBool(opts.MemoryOnly)
		if opts.RemoteURL != "" {
			u, err := cString("remote URL", opts.RemoteURL, StatusInvalidArgument)
			if err != nil {
				return nil, err
			}
			defer C.free(unsafe.Pointer(u))
			o.remote_url = u
		}
		o.remote_read_only = cBool(opts.RemoteReadOnly)
	}
	var h *C.kjit_cache
	if err := call(func() C.kjit_status { return C.kjit_cache_open(&o, &h) }); err != nil {
		return nil, err
	}
	c := &Cache{h: h}
	runtime.SetFinalizer(c, (*Cache).Close)
	return c, nil
}

func cBool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// Close closes the cache. It fails with StatusInvalidArgument while compilers created
// with this cache are still open. Closing twice is a no-op. Close must not race with
// other calls on the same cache.
func (c *Cache) Close() error {
	if c == nil || c.h == nil {
		return nil
	}
	if n := atomic.LoadInt32(&c.users); n > 0 {
		return &Error{Status: StatusInvalidArgument,
			Message: fmt.Sprintf("cache still used by %d open compiler(s): close them first", n)}
	}
	C.kjit_cache_close(c.h)
	c.h = nil
	runtime.SetFinalizer(c, nil)
	return nil
}

func (c *Cache) handle() *C.kjit_cache {
	if c == nil {
		return nil
	}
	return c.h
}

// Dir is the cache directory ("" for a memory-only cache).
func (c *Cache) Dir() string {
	s := C.GoString(C.kjit_cache_directory(c.handle()))
	runtime.KeepAlive(c)
	return s
}

// Stats reads the cache's counters.
func (c *Cache) Stats() (CacheStats, error) {
	var s C.kjit_cache_stats
	s.struct_size = C.uint32_t(unsafe.Sizeof(s))
	err := call(func() C.kjit_status { return C.kjit_cache_stats_get(c.handle(), &s) })
	runtime.KeepAlive(c)
	if err != nil {
		return CacheStats{}, err
	}
	return CacheStats{
		DiskState:      DiskState(s.disk_state),
		MemoryHits:     uint64(s.memory_hits),
		DiskHits:       uint64(s.disk_hits),
		RemoteHits:     uint64(s.remote_hits),
		Misses:         uint64(s.misses),
		Compiles:       uint64(s.compiles),
		Stores:         uint64(s.stores),
		StoreFailures:  uint64(s.store_failures),
		CorruptEntries: uint64(s.corrupt_entries),
		Evictions:      uint64(s.evictions),
		Waits:          uint64(s.waits),
		CompileMSSaved: float64(s.compile_ms_saved),
		MemoryEntries:  uint64(s.memory_entries),
		MemoryBytes:    uint64(s.memory_bytes),
		DiskEntries:    uint64(s.disk_entries),
		DiskBytes:      uint64(s.disk_bytes),
		MaxSizeBytes:   uint64(s.max_size_bytes),
		RemoteErrors:   uint64(s.remote_errors),
		RemoteTimeouts: uint64(s.remote_timeouts),
		Message:        C.GoString(&s.message[0]),
		NotStored:      uint64(s.not_stored),
		PchCreated:     uint64(s.pch_created),
		PchUsed:        uint64(s.pch_used),
		PchFailed:      uint64(s.pch_failed),

		RemoteClaims:            uint64(s.remote_claims),
		RemoteClaimWaits:        uint64(s.remote_claim_waits),
		RemoteClaimWaitHits:     uint64(s.remote_claim_wait_hits),
		RemoteClaimWaitTimeouts: uint64(s.remote_claim_wait_timeouts),

		TotalMemoryHits:              uint64(s.total_memory_hits),
		TotalDiskHits:                uint64(s.total_disk_hits),
		TotalRemoteHits:              uint64(s.total_remote_hits),
		TotalMisses:                  uint64(s.total_misses),
		TotalCompiles:                uint64(s.total_compiles),
		TotalCorruptEntries:          uint64(s.total_corrupt_entries),
		TotalEvictions:               uint64(s.total_evictions),
		TotalRemoteErrors:            uint64(s.total_remote_errors),
		TotalRemoteTimeouts:          uint64(s.total_remote_timeouts),
		TotalCompileMSSaved:          float64(s.total_compile_ms_saved),
		TotalNotStored:               uint64(s.total_not_stored),
		TotalPchCreated:              uint64(s.total_pch_created),
		TotalPchUsed:                 uint64(s.total_pch_used),
		TotalPchFailed:               uint64(s.total_pch_failed),
		TotalRemoteClaims:            uint64(s.total_remote_claims),
		TotalRemoteClaimWaits:        uint64(s.total_remote_claim_waits),
		TotalRemoteClaimWaitHits:     uint64(s.total_remote_claim_wait_hits),
		TotalRemoteClaimWaitTimeouts: uint64(s.total_remote_claim_wait_timeouts),
	}, nil
}

// ClearMemory drops the in-process memory tier; the disk is untouched.
func (c *Cache) ClearMemory() error {
	err := call(func() C.kjit_status { return C.kjit_cache_clear_memory(c.handle()) })
	runtime.KeepAlive(c)
	return err
}

// Clear removes every entry from both tiers.
func (c *Cache) Clear() error {
	err := call(func() C.kjit_status { return C.kjit_cache_clear(c.handle()) })
	runtime.KeepAlive(c)
	return err
}

// Get returns the entry stored under key (64 hex digits), checksums verified.
func (c *Cache) Get(key string) (*Binary, error) {
	k, err := cString("key", key, StatusInvalidArgument)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(k))
	var out *C.kjit_binary
	err = call(func() C.kjit_status { return C.kjit_cache_get(c.handle(), k, &out) })
	runtime.KeepAlive(c)
	if err != nil {
		return nil, err
	}
	return newBinary(out), nil
}

// Put stores a successful binary under its own key.
func (c *Cache) Put(b *Binary) error {
	err := call(func() C.kjit_status { return C.kjit_cache_put(c.handle(), b.handle()) })
	runtime.KeepAlive(c)
	runtime.KeepAlive(b)
	return err
}

// Remove removes one entry from both tiers (StatusNotFound if it was not there).
func (c *Cache) Remove(key string) error {
	k, err := cString("key", key, StatusInvalidArgument)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(k))
	err = call(func() C.kjit_status { return C.kjit_cache_remove(c.handle(), k) })
	runtime.KeepAlive(c)
	return err
}

// List returns every disk entry, most recently used first.
func (c *Cache) List() ([]CacheEntry, error) {
	var entries []CacheEntry
	h := cgo.NewHandle(&entries)
	defer h.Delete()
	err := call(func() C.kjit_status { return C.kjitgo_cache_list(c.handle(), C.uintptr_t(h)) })
	runtime.KeepAlive(c)
	if err != nil {
		return nil, err
	}
	return entries, nil
}

// Verify checks every disk entry; bad entries are removed.
func (c *Cache) Verify() (checked, bad uint64, err error) {
	var ch, b C.uint64_t
	err = call(func() C.kjit_status { return C.kjit_cache_verify(c.handle(), &ch, &b) })
	runtime.KeepAlive(c)
	return uint64(ch), uint64(b), err
}

// Prune evicts least-recently-used entries until the disk tier holds at most maxBytes.
func (c *Cache) Prune(maxBytes uint64) (removed uint64, err error) {
	var r C.uint64_t
	err = call(func() C.kjit_status { return C.kjit_cache_prune(c.handle(), C.uint64_t(maxBytes), &r) })
	runtime.KeepAlive(c)
	return uint64(r), err
}

// Export writes every disk entry to one file, each record signed (HMAC-SHA256) when
// KJIT_EXPORT_KEY is set.
func (c *Cache) Export(path string) (count uint64, err error) {
	p, err := cString("path", path, StatusInvalidArgument)
	if err != nil {
		return 0, err
	}
	defer C.free(unsafe.Pointer(p))
	var n C.uint64_t
	err = call(func() C.kjit_status { return C.kjit_cache_export(c.handle(), p, &n) })
	runtime.KeepAlive(c)
	return uint64(n), err
}

// Import reads an export file; every entry is verified before it is stored. An export
// file is trusted input: importing someone else's is running their code. With
// KJIT_EXPORT_KEY set, records without a valid signature are rejected.
func (c *Cache) Import(path string) (imported, rejected uint64, err error) {
	p, err := cString("path", path, StatusInvalidArgument)
	if err != nil {
		return 0, 0, err
	}
	defer C.free(unsafe.Pointer(p))
	var i, r C.uint64_t
	err = call(func() C.kjit_status { return C.kjit_cache_import(c.handle(), p, &i, &r) })
	runtime.KeepAlive(c)
	return uint64(i), uint64(r), err
}
