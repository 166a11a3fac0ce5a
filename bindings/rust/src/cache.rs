//! The persistent kernel cache ([`Cache`]).

use std::ffi::CStr;
use std::fmt;
use std::os::raw::{c_int, c_void};
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::Arc;

use crate::binary::Binary;
use crate::error::{check, Result};
use crate::sys;
use crate::util::{cstr_or_empty, cstring, path_cstring};

/// Options for [`Cache::open`]. `Default` gives the library's defaults.
#[derive(Debug, Clone, Default)]
pub struct CacheOptions {
    /// `None`: `$KJIT_CACHE_DIR`, else `$XDG_CACHE_HOME/kjit`, else `~/.cache/kjit`, else
    /// the temp dir.
    pub directory: Option<PathBuf>,
    /// Disk bound in bytes; 0 = default (1 GiB or `$KJIT_CACHE_MAX_SIZE`).
    pub max_size_bytes: u64,
    /// Memory tier bound in bytes; 0 = default (64 MiB).
    pub memory_max_bytes: u64,
    /// Never write the disk tier.
    pub read_only: bool,
    /// No disk tier at all.
    pub memory_only: bool,
    /// Fleet tier: "redis://host:port[/db]" or "unix:///path/redis.sock"; `None` =
    /// `$KJIT_REMOTE` (unset = none). Never required: failures are counted and logged.
    pub remote_url: Option<String>,
    /// Never write to the remote tier.
    pub remote_read_only: bool,
}

impl CacheOptions {
    /// Defaults with `directory` set.
    pub fn in_dir(dir: impl Into<PathBuf>) -> CacheOptions {
        CacheOptions {
            directory: Some(dir.into()),
            ..Default::default()
        }
    }
}

/// State of the disk tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskState {
    Ok,
    ReadOnly,
    Disabled,
    Unavailable,
    Other(i32),
}

/// Counters and sizes of a cache handle (`kjit_cache_stats`). The counters count what this
/// handle did since it was opened; the `total_*` fields count every process that has used
/// the cache database, this one included (each handle adds its counts to the database when
/// it stores an entry and when it closes).
#[derive(Debug, Clone, PartialEq)]
pub struct CacheStats {
    pub disk_state: DiskState,
    pub memory_hits: u64,
    pub disk_hits: u64,
    pub remote_hits: u64,
    pub misses: u64,
    pub compiles: u64,
    pub stores: u64,
    pub store_failures: u64,
    pub corrupt_entries: u64,
    pub evictions: u64,
    pub waits: u64,
    pub compile_ms_saved: f64,
    pub memory_entries: u64,
    pub memory_bytes: u64,
    pub disk_entries: u64,
    pub disk_bytes: u64,
    pub max_size_bytes: u64,
    pub remote_errors: u64,
    pub remote_timeouts: u64,
    /// Why the disk tier is not OK, or "".
    pub message: String,
    /// Compiles whose result was not stored because NVRTC read a file the cache key does
    /// not cover (the log says which); the caller still got the result. Such a program is
    /// compiled again on every request.
    pub not_stored: u64,
    /// Compiles that created a precompiled header, used one, or could not make one (they
    /// still compiled, without it).
    pub pch_created: u64,
    pub pch_used: u64,
    pub pch_failed: u64,
    pub total_not_stored: u64,
    pub total_pch_created: u64,
    pub total_pch_used: u64,
    pub total_pch_failed: u64,
    /// Fleet-wide single flight through the remote tier: keys this handle claimed and
    /// compiled for the fleet, misses that waited on another node's claim, waits that
    /// ended with that node's entry, and waits that reached the deadline (the handle then
    /// compiled itself).
    pub remote_claims: u64,
    pub remote_claim_waits: u64,
    pub remote_claim_wait_hits: u64,
    pub remote_claim_wait_timeouts: u64,
    pub total_remote_claims: u64,
    pub total_remote_claim_waits: u64,
    pub total_remote_claim_wait_hits: u64,
    pub total_remote_claim_wait_timeouts: u64,
    pub total_memory_hits: u64,
    pub total_disk_hits: u64,
    pub total_remote_hits: u64,
    pub total_misses: u64,
    pub total_compiles: u64,
    pub total_corrupt_entries: u64,
    pub total_evictions: u64,
    pub total_remote_errors: u64,
    pub total_remote_timeouts: u64,
    pub total_compile_ms_saved: f64,
}

/// One disk entry as listed by [`Cache::list`].
#[derive(Debug, Clone, PartialEq)]
pub struct CacheEntry {
    pub key: String,
    pub target: String,
    /// `__global__` entry names.
    pub kernels: Vec<String>,
    pub bytes: u64,
    pub created: i64,
    pub last_used: i64,
    pub compile_ms: f64,
}

/// The persistent kernel cache: a memory tier over one SQLite database shared by every
/// thread and process of the machine. Closed on drop.
pub struct Cache {
    pub(crate) raw: *mut sys::kjit_cache,
}

// The C API: "every kjit_cache_* function may be called from any thread at once".
unsafe impl Send for Cache {}
unsafe impl Sync for Cache {}

impl Cache {
    /// Opens a cache. Never fails because of the disk: an unusable directory gives a
    /// memory-only cache whose [`stats`](Cache::stats) say why.
    pub fn open(opts: &CacheOptions) -> Result<Cache> {
        let dir = opts
            .directory
            .as_deref()
            .map(|d| path_cstring("cache directory", d))
            .transpose()?;
        let remote = opts
            .remote_url
            .as_deref()
            .map(|r| cstring("remote URL", r))
            .transpose()?;
        // Built here rather than with kjit_cache_options_init(), which writes the library's
        // (possibly larger, newer) struct; struct_size tells the library which fields we know.
        let c = sys::kjit_cache_options {
            struct_size: std::mem::size_of::<sys::kjit_cache_options>() as u32,
            directory: dir.as_ref().map_or(ptr::null(), |d| d.as_ptr()),
            max_size_bytes: opts.max_size_bytes,
            memory_max_bytes: opts.memory_max_bytes,
            read_only: opts.read_only as c_int,
            memory_only: opts.memory_only as c_int,
            remote_url: remote.as_ref().map_or(ptr::null(), |r| r.as_ptr()),
            remote_read_only: opts.remote_read_only as c_int,
        };
        let mut raw = ptr::null_mut();
        check(unsafe { sys::kjit_cache_open(&c, &mut raw) })?;
        Ok(Cache { raw })
    }

    /// [`open`](Cache::open) into an [`Arc`], for owned handles that share the cache:
    /// [`Compiler::with_cache`](crate::Compiler::with_cache) and
    /// [`Gemm::with_cache`](crate::Gemm::with_cache).
    pub fn open_shared(opts: &CacheOptions) -> Result<Arc<Cache>> {
        Cache::open(opts).map(Arc::new)
    }

    /// The raw handle (still owned by `self`).
    pub fn as_raw(&self) -> *mut sys::kjit_cache {
        self.raw
    }

    /// Directory of the cache ("" for a memory-only cache).
    pub fn directory(&self) -> &str {
        unsafe { cstr_or_empty(sys::kjit_cache_directory(self.raw)) }
    }

    pub fn stats(&self) -> Result<CacheStats> {
        let mut s: sys::kjit_cache_stats = unsafe { std::mem::zeroed() };
        s.struct_size = std::mem::size_of::<sys::kjit_cache_stats>() as u32;
        check(unsafe { sys::kjit_cache_stats_get(self.raw, &mut s) })?;
        let message = unsafe { CStr::from_ptr(s.message.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        Ok(CacheStats {
            disk_state: match s.disk_state {
                0 => DiskState::Ok,
                1 => DiskState::ReadOnly,
                2 => DiskState::Disabled,
                3 => DiskState::Unavailable,
                n => DiskState::Other(n),
            },
            memory_hits: s.memory_hits,
            disk_hits: s.disk_hits,
            remote_hits: s.remote_hits,
            misses: s.misses,
            compiles: s.compiles,
            stores: s.stores,
            store_failures: s.store_failures,
            corrupt_entries: s.corrupt_entries,
            evictions: s.evictions,
            waits: s.waits,
            compile_ms_saved: s.compile_ms_saved,
            memory_entries: s.memory_entries,
            memory_bytes: s.memory_bytes,
            disk_entries: s.disk_entries,
            disk_bytes: s.disk_bytes,
            max_size_bytes: s.max_size_bytes,
            remote_errors: s.remote_errors,
            remote_timeouts: s.remote_timeouts,
            message,
            not_stored: s.not_stored,
            pch_created: s.pch_created,
            pch_used: s.pch_used,
            pch_failed: s.pch_failed,
            total_not_stored: s.total_not_stored,
            total_pch_created: s.total_pch_created,
            total_pch_used: s.total_pch_used,
            total_pch_failed: s.total_pch_failed,
            remote_claims: s.remote_claims,
            remote_claim_waits: s.remote_claim_waits,
            remote_claim_wait_hits: s.remote_claim_wait_hits,
            remote_claim_wait_timeouts: s.remote_claim_wait_timeouts,
            total_remote_claims: s.total_remote_claims,
            total_remote_claim_waits: s.total_remote_claim_waits,
            total_remote_claim_wait_hits: s.total_remote_claim_wait_hits,
            total_remote_claim_wait_timeouts: s.total_remote_claim_wait_timeouts,
            total_memory_hits: s.total_memory_hits,
            total_disk_hits: s.total_disk_hits,
            total_remote_hits: s.total_remote_hits,
            total_misses: s.total_misses,
            total_compiles: s.total_compiles,
            total_corrupt_entries: s.total_corrupt_entries,
            total_evictions: s.total_evictions,
            total_remote_errors: s.total_remote_errors,
            total_remote_timeouts: s.total_remote_timeouts,
            total_compile_ms_saved: s.total_compile_ms_saved,
        })
    }

    /// Drops the in-process memory tier; the disk is untouched.
    pub fn clear_memory(&self) -> Result<()> {
        check(unsafe { sys::kjit_cache_clear_memory(self.raw) })
    }

    /// Removes every entry from both tiers.
    pub fn clear(&self) -> Result<()> {
        check(unsafe { sys::kjit_cache_clear(self.raw) })
    }

    /// The entry stored under `key` (64 hex digits), checksums verified.
    pub fn get(&self, key: &str) -> Result<Binary> {
        let k = cstring("key", key)?;
        let mut out = ptr::null_mut();
        check(unsafe { sys::kjit_cache_get(self.raw, k.as_ptr(), &mut out) })?;
        Ok(Binary { raw: out })
    }

    /// Stores a successful binary under its own key.
    pub fn put(&self, binary: &Binary) -> Result<()> {
        check(unsafe { sys::kjit_cache_put(self.raw, binary.raw) })
    }

    /// Removes one entry from both tiers (`Status::NotFound` if it was not there).
    pub fn remove(&self, key: &str) -> Result<()> {
        let k = cstring("key", key)?;
        check(unsafe { sys::kjit_cache_remove(self.raw, k.as_ptr()) })
    }

    /// Every disk entry, most recently used first.
    pub fn list(&self) -> Result<Vec<CacheEntry>> {
        unsafe extern "C" fn collect(
            info: *const sys::kjit_cache_entry_info,
            user: *mut c_void,
        ) -> c_int {
            let v = &mut *(user as *mut Vec<CacheEntry>);
            let i = &*info;
            let kernels = cstr_or_empty(i.kernels);
            v.push(CacheEntry {
                key: cstr_or_empty(i.key).to_string(),
                target: cstr_or_empty(i.target).to_string(),
                kernels: if kernels.is_empty() {
                    Vec::new()
                } else {
                    kernels.split(',').map(str::to_string).collect()
                },
                bytes: i.bytes,
                created: i.created,
                last_used: i.last_used,
                compile_ms: i.compile_ms,
            });
            0
        }
        let mut v: Vec<CacheEntry> = Vec::new();
        check(unsafe {
            sys::kjit_cache_list(self.raw, Some(collect), &mut v as *mut _ as *mut c_void)
        })?;
        Ok(v)
    }

    /// Checks every disk entry; bad ones are removed. Returns (checked, bad).
    pub fn verify(&self) -> Result<(u64, u64)> {
        let (mut checked, mut bad) = (0u64, 0u64);
        check(unsafe { sys::kjit_cache_verify(self.raw, &mut checked, &mut bad) })?;
        Ok((checked, bad))
    }

    /// Evicts least-recently-used entries until the disk tier holds at most `max_bytes`.
    /// Returns the number removed.
    pub fn prune(&self, max_bytes: u64) -> Result<u64> {
        let mut removed = 0u64;
        check(unsafe { sys::kjit_cache_prune(self.raw, max_bytes, &mut removed) })?;
        Ok(removed)
    }

    /// Writes every disk entry to one export file; returns the number written. Each record
    /// is signed (HMAC-SHA256) when `KJIT_EXPORT_KEY` is set.
    pub fn export(&self, path: impl AsRef<Path>) -> Result<u64> {
        let p = path_cstring("path", path.as_ref())?;
        let mut n = 0u64;
        check(unsafe { sys::kjit_cache_export(self.raw, p.as_ptr(), &mut n) })?;
        Ok(n)
    }

    /// Reads an export file; returns (imported, rejected). An export file is trusted
    /// input: importing someone else's is running their code. With `KJIT_EXPORT_KEY` set,
    /// records without a valid signature are rejected (see `kjit_cache_import`).
    pub fn import(&self, path: impl AsRef<Path>) -> Result<(u64, u64)> {
        let p = path_cstring("path", path.as_ref())?;
        let (mut imported, mut rejected) = (0u64, 0u64);
        check(unsafe {
            sys::kjit_cache_import(self.raw, p.as_ptr(), &mut imported, &mut rejected)
        })?;
        Ok((imported, rejected))
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        unsafe { sys::kjit_cache_close(self.raw) }
    }
}

impl fmt::Debug for Cache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cache")
            .field("directory", &self.directory())
            .finish()
    }
}
