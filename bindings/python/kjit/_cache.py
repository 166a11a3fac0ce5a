"""The persistent kernel cache (include/kjit/cache.h)."""
from __future__ import annotations

import ctypes
import os

from . import _lib
from ._binary import Binary
from ._errors import IntEnum, InvalidArgument, InvalidHandle
from ._util import Handle, Users, as_bool, as_int, check, cstr, out_handle, record, text

TYPE_CHECKING = False  # typing only for type checkers: annotations are strings
if TYPE_CHECKING:
    from typing import List, Optional, Tuple, Union

_U64 = (1 << 64) - 1


class DiskState(IntEnum):
    """State of a cache's disk tier (``kjit_disk_state``)."""
    OK = 0           #: read-write SQLite tier
    READ_ONLY = 1    #: opened read-only, by request or because it is not writable
    DISABLED = 2     #: memory-only by request or KJIT_CACHE_DISABLE
    UNAVAILABLE = 3  #: could not be used; CacheStats.message says why


class RemoteState(IntEnum):
    """State of a cache's remote (fleet) tier (``kjit_remote_state``)."""
    NONE = 0       #: no remote configured
    OK = 1         #: configured; last attempt succeeded or none made yet
    BACKOFF = 2    #: circuit breaker open after failures
    NOT_BUILT = 3  #: configured, but this kjit was built without hiredis


def _enum(cls, value):
    try:
        return cls(value)
    except ValueError:
        return value


@record(frozen=True)
class CacheStats:
    """Counters and sizes of a cache handle (``kjit_cache_stats``). Counters count this
    handle since it was opened; ``total_*`` fields count every process that has used the
    database."""
    disk_state: DiskState
    memory_hits: int
    disk_hits: int
    remote_hits: int
    misses: int              #: lookups that found nothing in any tier
    compiles: int            #: NVRTC runs done through this handle
    stores: int              #: entries written to disk by this handle
    store_failures: int
    corrupt_entries: int
    evictions: int
    waits: int               #: times this handle waited for another compiler
    compile_ms_saved: float  #: sum of the stored compile times of all hits
    memory_entries: int
    memory_bytes: int
    disk_entries: int
    disk_bytes: int
    max_size_bytes: int      #: effective disk bound
    remote_errors: int
    remote_timeouts: int
    message: str             #: why the disk tier is not OK, or ""
    total_memory_hits: int
    total_disk_hits: int
    total_remote_hits: int
    total_misses: int
    total_compiles: int
    total_corrupt_entries: int
    total_evictions: int
    total_remote_errors: int
    total_remote_timeouts: int
    total_compile_ms_saved: float
    remote_state: RemoteState
    #: compiles whose result was not stored because NVRTC read a file the cache key does
    #: not cover (the compile log says which); the caller still got the result
    not_stored: int
    #: compiles that created, used, or could not make a precompiled header
    pch_created: int
    pch_used: int
    pch_failed: int
    #: ``not_stored`` and the PCH counts over every process of the database
    total_not_stored: int
    total_pch_created: int
    total_pch_used: int
    total_pch_failed: int
    #: fleet-wide single flight through the remote tier: keys this handle claimed and
    #: compiled for the fleet, misses that waited on another node's claim, waits that
    #: ended with that node's entry, and waits that reached the deadline (the handle then
    #: compiled itself)
    remote_claims: int
    remote_claim_waits: int
    remote_claim_wait_hits: int
    remote_claim_wait_timeouts: int
    #: the same four over every process of the database
    total_remote_claims: int
    total_remote_claim_waits: int
    total_remote_claim_wait_hits: int
    total_remote_claim_wait_timeouts: int

    @property
    def hits(self) -> int:
        """Hits of every tier (memory + disk + remote) of this handle."""
        return self.memory_hits + self.disk_hits + self.remote_hits


@record(frozen=True)
class CacheEntry:
    """One disk entry, as listed by :meth:`Cache.entries`."""
    key: str             #: 64 hex digits
    target: str          #: e.g. "sm_90"
    kernels: List[str]   #: entry names
    bytes: int           #: total stored bytes
    created: int         #: unix seconds
    last_used: int       #: unix seconds (updated coarsely)
    compile_ms: float


def _key(key: str) -> bytes:
    b = cstr(key, "key")
    if len(b) != 64 or any(c not in b"0123456789abcdefABCDEF" for c in b):
        raise InvalidArgument(None, "key must be 64 hex digits, got %r" % key)
    return b


class Cache(Handle):
    """The persistent kernel cache: an in-process memory tier over one SQLite database
    shared by every thread and process of the machine (C, Rust, Go, Julia and Python
    alike). Thread-safe.

    Args:
        directory: the cache directory; None = ``$KJIT_CACHE_DIR``, else
            ``$XDG_CACHE_HOME/kjit``, else ``~/.cache/kjit``, else the temp directory.
        max_size_bytes: disk bound; 0 = default (1 GiB or ``$KJIT_CACHE_MAX_SIZE``).
        memory_max_bytes: memory tier bound; 0 = default (64 MiB).
        read_only: never write the disk tier.
        memory_only: no disk tier at all.
        remote_url: fleet tier, ``redis://host:port[/db]`` or ``unix:///path.sock``;
            None = ``$KJIT_REMOTE``.
        remote_read_only: never write to the remote tier.

    Opening does not fail because of the disk: an unusable directory gives a memory-only
    cache whose :meth:`stats` say why. Close it (or use ``with``) after every
    :class:`Compiler` and :class:`Gemm` created with it; closing earlier raises
    :class:`InvalidArgument`.
    """

    _kind = "Cache"

    def __init__(self, directory: Optional[Union[str, "os.PathLike[str]"]] = None, *,
                 max_size_bytes: int = 0, memory_max_bytes: int = 0,
                 read_only: bool = False, memory_only: bool = False,
                 remote_url: Optional[str] = None, remote_read_only: bool = False) -> None:
        self._users = Users()
        o = _lib.CacheOptionsStruct()
        # The library's defaults, written within the struct these bindings know.
        check(_lib.lib().kjit_cache_options_init_sized(ctypes.byref(o), ctypes.sizeof(o)))
        if directory is not None:
            o.directory = cstr(directory, "directory", path=True, allow_empty=False)
        o.max_size_bytes = as_int(max_size_bytes, "max_size_bytes", 0, _U64)
        o.memory_max_bytes = as_int(memory_max_bytes, "memory_max_bytes", 0, _U64)
        o.read_only = as_bool(read_only, "read_only")
        o.memory_only = as_bool(memory_only, "memory_only")
        if remote_url is not None:
            o.remote_url = cstr(remote_url, "remote_url", allow_empty=False)
        o.remote_read_only = as_bool(remote_read_only, "remote_read_only")
        lib = _lib.lib()
        h = ctypes.c_void_p()
        check(lib.kjit_cache_open(ctypes.byref(o), ctypes.byref(h)))
        self._h = out_handle(h)

    def _destroy(self, h: int) -> None:
        _lib.lib().kjit_cache_close(h)

    def close(self) -> None:
        """Close the cache (flushes pending last-use times). Raises
        :class:`InvalidArgument` while compilers or GEMM handles created with it are open.
        Closing twice is a no-op."""
        if self._h is not None and self._users.count > 0:
            raise InvalidArgument(
                None, "Cache still used by %d open Compiler/Gemm handle(s): close them first"
                % self._users.count)
        super().close()

    def __del__(self) -> None:
        # Dependants hold a reference to the cache, so a cache collected with users can
        # only happen at interpreter shutdown: leak it rather than pull it from under them.
        if self._h is not None and getattr(self, "_users", None) is not None \
                and self._users.count == 0:
            super().__del__()

    def __repr__(self) -> str:
        if self._h is None:
            return "<kjit.Cache closed>"
        return "<kjit.Cache %r>" % (self.directory or "memory-only")

    @property
    def directory(self) -> str:
        """The cache directory ("" for a memory-only cache)."""
        return text(_lib.lib().kjit_cache_directory(self._handle()))

    def stats(self) -> CacheStats:
        """Read the counters (see :class:`CacheStats`)."""
        s = _lib.CacheStatsStruct()
        s.struct_size = ctypes.sizeof(s)
        check(_lib.lib().kjit_cache_stats_get(self._handle(), ctypes.byref(s)))
        # Every field of the C struct but struct_size, under its own name: CacheStats
        # declares the same ones (tools/check_counters.py checks the counters).
        fields = {name: getattr(s, name) for name, _ in s._fields_ if name != "struct_size"}
        fields.update(disk_state=_enum(DiskState, s.disk_state),
                      remote_state=_enum(RemoteState, s.remote_state),
                      message=s.message.decode("utf-8", "replace"))
        return CacheStats(**fields)

    def clear_memory(self) -> None:
        """Drop the in-process memory tier; the disk is untouched."""
        check(_lib.lib().kjit_cache_clear_memory(self._handle()))

    def clear(self) -> None:
        """Remove every entry from both tiers (:class:`ReadOnly` for a read-only cache)."""
        check(_lib.lib().kjit_cache_clear(self._handle()))

    def get(self, key: str) -> "Binary":
        """The entry stored under `key` (64 hex digits), checksums verified. Raises
        :class:`NotFound` when there is none, :class:`CacheCorrupt` when it failed
        verification (it is then removed)."""
        k = _key(key)
        out = ctypes.c_void_p()
        check(_lib.lib().kjit_cache_get(self._handle(), k, ctypes.byref(out)))
        return Binary._wrap(out_handle(out))

    def put(self, binary: "Binary") -> None:
        """Store a successful binary under its own key (e.g. one from another cache)."""
        if not isinstance(binary, Binary):
            raise TypeError("put: binary must be a kjit.Binary, not %s" % type(binary).__name__)
        check(_lib.lib().kjit_cache_put(self._handle(), binary._handle()))

    def remove(self, key: str) -> None:
        """Remove one entry from both tiers (:class:`NotFound` if it was not there)."""
        k = _key(key)
        check(_lib.lib().kjit_cache_remove(self._handle(), k))

    def entries(self) -> List[CacheEntry]:
        """Every disk entry, most recently used first."""
        out: List[CacheEntry] = []

        def visit(info, _user):
            try:
                i = info.contents
                out.append(CacheEntry(
                    key=text(i.key), target=text(i.target),
                    kernels=[k for k in text(i.kernels).split(",") if k],
                    bytes=i.bytes, created=i.created, last_used=i.last_used,
                    compile_ms=i.compile_ms))
                return 0
            except BaseException:  # noqa: BLE001 - never let an exception unwind into C
                return 1

        fn = _lib.CACHE_LIST_FN(visit)
        check(_lib.lib().kjit_cache_list(self._handle(), fn, None))
        return out

    def verify(self) -> Tuple[int, int]:
        """Check every disk entry and the database; bad entries are removed. Returns
        (checked, bad)."""
        checked, bad = ctypes.c_uint64(), ctypes.c_uint64()
        check(_lib.lib().kjit_cache_verify(self._handle(), ctypes.byref(checked),
                                           ctypes.byref(bad)))
        return checked.value, bad.value

    def prune(self, max_bytes: int) -> int:
        """Evict least-recently-used entries until the disk tier holds at most
        `max_bytes`; returns how many were removed."""
        n = ctypes.c_uint64()
        check(_lib.lib().kjit_cache_prune(self._handle(),
                                          as_int(max_bytes, "max_bytes", 0, _U64),
                                          ctypes.byref(n)))
        return n.value

    def export_to(self, path: Union[str, "os.PathLike[str]"]) -> int:
        """Write every disk entry to one file in kjit's portable export format; returns
        the number written."""
        p = cstr(path, "path", path=True, allow_empty=False)
        n = ctypes.c_uint64()
        check(_lib.lib().kjit_cache_export(self._handle(), p, ctypes.byref(n)))
        return n.value

    def import_from(self, path: Union[str, "os.PathLike[str]"]) -> Tuple[int, int]:
        """Read an export file; every entry is verified before it is stored. Returns
        (imported, rejected)."""
        p = cstr(path, "path", path=True, allow_empty=False)
        imported, rejected = ctypes.c_uint64(), ctypes.c_uint64()
        check(_lib.lib().kjit_cache_import(self._handle(), p, ctypes.byref(imported),
                                           ctypes.byref(rejected)))
        return imported.value, rejected.value

    # Dependants (Compiler, Gemm) register here.
    def _acquire(self) -> int:
        h = self._handle()
        self._users.add()
        return h

    def _release(self) -> None:
        self._users.remove()


def _cache_handle(cache: Optional[Cache], what: str) -> Optional[int]:
    if cache is None:
        return None
    if not isinstance(cache, Cache):
        raise TypeError("%s: cache must be a kjit.Cache or None, not %s"
                        % (what, type(cache).__name__))
    if cache._h is None:
        raise InvalidHandle(None, "%s: the Cache is closed" % what)
    return cache._h
