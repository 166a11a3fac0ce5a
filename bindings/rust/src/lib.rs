//! Safe Rust bindings for kjit: compile CUDA C++ at run time with NVRTC, keep the results
//! in a cache shared by every thread and process of the machine, and launch kernels.
//!
//! A thin layer over the C API in `include/kjit/*.h` (re-exported raw as [`sys`]):
//! every type owns one C handle and frees it on `Drop`; every fallible call returns
//! [`Result<T>`] whose [`Error`] carries the status, the library's message and, for
//! compile errors, NVRTC's log.
//!
//! ```no_run
//! use kjit::{Cache, CacheOptions, Compiler, Options};
//! # fn main() -> kjit::Result<()> {
//! let cache = Cache::open(&CacheOptions::default())?;
//! let compiler = Compiler::new(Some(&cache), 0)?;
//! let mut opts = Options::new()?;
//! opts.target("sm_90")?.add("-std=c++17")?;
//! let bin = compiler.compile(r#"extern "C" __global__ void k(float* x) { x[0] = 1; }"#,
//!                            Some(&opts))?;
//! println!("{} bytes of PTX, from {:?}", bin.ptx().unwrap().len(), bin.tier());
//! # Ok(()) }
//! ```
//!
//! Thread-safety follows the C documentation: [`Cache`], [`Compiler`], [`Binary`] and
//! [`Kernel`] are `Send + Sync` (the library allows concurrent use of one handle);
//! [`Options`] is `Send + Sync` with mutation behind `&mut self` (concurrent compiles may
//! read it, nobody may change it meanwhile); [`PendingCompile`] is `Send + Sync` with
//! `wait` behind `&mut self` (one waiter at a time).

use std::ffi::{CStr, CString};
use std::fmt;
use std::marker::PhantomData;
use std::os::raw::{c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::ptr;
use std::time::Duration;

pub use kjit_sys as sys;

// ---- errors ------------------------------------------------------------------------------

/// A `kjit_status` value. The numbers are stable (see `include/kjit/common.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    Ok,
    InvalidArgument,
    InvalidHandle,
    OutOfMemory,
    InvalidSource,
    Compile,
    InvalidOption,
    UnsupportedTarget,
    NameNotFound,
    Nvrtc,
    Cache,
    CacheCorrupt,
    NotFound,
    ReadOnly,
    CudaUnavailable,
    Cuda,
    ArgumentMismatch,
    StaleHandle,
    CudaSticky,
    Unsupported,
    Cancelled,
    Timeout,
    BufferTooSmall,
    Cublas,
    Io,
    Internal,
    /// A status this version of the bindings does not know.
    Other(i32),
}

impl Status {
    /// Maps a C status code.
    pub fn from_raw(code: i32) -> Status {
        use Status::*;
        match code {
            0 => Ok,
            1 => InvalidArgument,
            2 => InvalidHandle,
            3 => OutOfMemory,
            4 => InvalidSource,
            5 => Compile,
            6 => InvalidOption,
            7 => UnsupportedTarget,
            8 => NameNotFound,
            9 => Nvrtc,
            10 => Cache,
            11 => CacheCorrupt,
            12 => NotFound,
            13 => ReadOnly,
            14 => CudaUnavailable,
            15 => Cuda,
            16 => ArgumentMismatch,
            17 => StaleHandle,
            18 => CudaSticky,
            19 => Unsupported,
            20 => Cancelled,
            21 => Timeout,
            22 => BufferTooSmall,
            23 => Cublas,
            24 => Io,
            99 => Internal,
            n => Other(n),
        }
    }

    /// The C status code.
    pub fn raw(self) -> i32 {
        use Status::*;
        match self {
            Ok => 0,
            InvalidArgument => 1,
            InvalidHandle => 2,
            OutOfMemory => 3,
            InvalidSource => 4,
            Compile => 5,
            InvalidOption => 6,
            UnsupportedTarget => 7,
            NameNotFound => 8,
            Nvrtc => 9,
            Cache => 10,
            CacheCorrupt => 11,
            NotFound => 12,
            ReadOnly => 13,
            CudaUnavailable => 14,
            Cuda => 15,
            ArgumentMismatch => 16,
            StaleHandle => 17,
            CudaSticky => 18,
            Unsupported => 19,
            Cancelled => 20,
            Timeout => 21,
            BufferTooSmall => 22,
            Cublas => 23,
            Io => 24,
            Internal => 99,
            Other(n) => n,
        }
    }

    /// The library's English name of the status (`kjit_status_string`).
    pub fn description(self) -> &'static str {
        status_string(self.raw())
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.description())
    }
}

/// The error of every fallible call: the status, the library's message (from
/// `kjit_last_error`, read on the same thread right after the call) and, for
/// [`Status::Compile`], NVRTC's full log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
    log: String,
}

impl Error {
    pub fn status(&self) -> Status {
        self.status
    }
    /// What failed, with which input, and why. May be empty.
    pub fn message(&self) -> &str {
        &self.message
    }
    /// NVRTC's log for compile errors; empty otherwise.
    pub fn log(&self) -> &str {
        &self.log
    }

    /// Builds an error for a failed call: reads the calling thread's `kjit_last_error()`.
    /// Must be called right after the failing kjit call, on the same thread.
    fn last(code: c_int) -> Error {
        let message = unsafe { cstr_or_empty(sys::kjit_last_error()) }.to_string();
        Error {
            status: Status::from_raw(code),
            message,
            log: String::new(),
        }
    }

    /// An error detected by the bindings before calling the library.
    fn local(status: Status, message: impl Into<String>) -> Error {
        Error {
            status,
            message: message.into(),
            log: String::new(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.status)?;
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        if !self.log.is_empty() {
            write!(f, "\n{}", self.log.trim_end())?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

#[inline]
fn check(code: c_int) -> Result<()> {
    if code == sys::KJIT_OK {
        Ok(())
    } else {
        Err(Error::last(code))
    }
}

/// Borrowed C string as &str; null or invalid UTF-8 give "" (the library promises UTF-8).
unsafe fn cstr_or_empty<'a>(p: *const c_char) -> &'a str {
    if p.is_null() {
        ""
    } else {
        CStr::from_ptr(p).to_str().unwrap_or("")
    }
}

unsafe fn cstr_opt<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        None
    } else {
        CStr::from_ptr(p).to_str().ok()
    }
}

/// Copies text for the C API. C reads a NUL byte as the end of the string, so text holding
/// one is refused here, before any C call: the source and header contents (code) with
/// `Status::InvalidSource`, anything else with `Status::InvalidArgument` (the statuses the
/// library gives such text when it is not valid UTF-8).
fn text_cstring(what: &str, bytes: &[u8], status: Status) -> Result<CString> {
    CString::new(bytes).map_err(|e| {
        Error::local(
            status,
            format!("{what} contains a NUL byte (byte {})", e.nul_position()),
        )
    })
}

/// A string argument other than code (names, options, keys, ...).
fn cstring(what: &str, s: &str) -> Result<CString> {
    text_cstring(what, s.as_bytes(), Status::InvalidArgument)
}

/// Code: a source or the contents of a header.
fn code_cstring(what: &str, s: &str) -> Result<CString> {
    text_cstring(what, s.as_bytes(), Status::InvalidSource)
}

fn path_cstring(what: &str, p: &Path) -> Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    text_cstring(what, p.as_os_str().as_bytes(), Status::InvalidArgument)
}

// ---- library-wide functions --------------------------------------------------------------

/// Run-time library version, encoded as major * 10000 + minor * 100 + patch.
pub fn version() -> i32 {
    unsafe { sys::kjit_version() }
}

/// Run-time library version as "major.minor.patch".
pub fn version_string() -> &'static str {
    unsafe { cstr_or_empty(sys::kjit_version_string()) }
}

/// The library's English name of a status code.
pub fn status_string(code: i32) -> &'static str {
    unsafe { cstr_or_empty(sys::kjit_status_string(code)) }
}

/// The NVRTC in use, e.g. "13.0.88 (CL-36424714)".
pub fn nvrtc_version() -> Result<&'static str> {
    let mut p: *const c_char = ptr::null();
    check(unsafe { sys::kjit_nvrtc_version(&mut p) })?;
    Ok(unsafe { cstr_or_empty(p) })
}

/// Severity of a log message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

/// A log callback: see [`set_log_callback`].
pub type LogFn = dyn Fn(LogLevel, &str) + Send + Sync;

unsafe extern "C" fn log_trampoline(level: c_int, message: *const c_char, user: *mut c_void) {
    let f = &*(user as *const Box<LogFn>);
    let level = match level {
        0 => LogLevel::Debug,
        1 => LogLevel::Info,
        2 => LogLevel::Warn,
        _ => LogLevel::Error,
    };
    let msg = if message.is_null() {
        std::borrow::Cow::Borrowed("")
    } else {
        CStr::from_ptr(message).to_string_lossy()
    };
    // A panic must not unwind into C.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(level, &msg)));
}

/// Routes the library's diagnostics to `callback` (`None` restores the default, which
/// writes to stderr when `KJIT_LOG` is set). The callback may run on any thread,
/// including the library's workers, and must not call kjit.
///
/// The library may still be inside a previous callback when it is replaced, so a replaced
/// callback is never freed (one small allocation per call of this function).
pub fn set_log_callback(callback: Option<Box<LogFn>>) {
    match callback {
        None => unsafe { sys::kjit_set_log_callback(None, ptr::null_mut()) },
        Some(cb) => {
            let user = Box::into_raw(Box::new(cb)) as *mut c_void;
            unsafe { sys::kjit_set_log_callback(Some(log_trampoline), user) }
        }
    }
}

/// SHA-256 of `data` as 64 lowercase hex digits.
pub fn hash_source(data: &[u8]) -> Result<String> {
    let mut out = [0 as c_char; 65];
    check(unsafe {
        sys::kjit_hash_source(data.as_ptr() as *const c_char, data.len(), out.as_mut_ptr())
    })?;
    Ok(unsafe { cstr_or_empty(out.as_ptr()) }.to_string())
}

/// SHA-256 over a length-prefixed, order-sensitive encoding of `options`.
pub fn hash_options<S: AsRef<str>>(options: &[S]) -> Result<String> {
    let owned = options
        .iter()
        .map(|s| cstring("option", s.as_ref()))
        .collect::<Result<Vec<_>>>()?;
    let ptrs: Vec<*const c_char> = owned.iter().map(|c| c.as_ptr()).collect();
    let mut out = [0 as c_char; 65];
    check(unsafe { sys::kjit_hash_options(ptrs.as_ptr(), ptrs.len(), out.as_mut_ptr()) })?;
    Ok(unsafe { cstr_or_empty(out.as_ptr()) }.to_string())
}

/// The cache key [`Compiler::compile`] would use for `(source, opts)`, without compiling.
pub fn compute_key(source: &str, opts: Option<&Options>) -> Result<String> {
    let src = code_cstring("source", source)?;
    let mut out = [0 as c_char; 65];
    check(unsafe { sys::kjit_compute_key(src.as_ptr(), opts_ptr(opts), out.as_mut_ptr()) })?;
    Ok(unsafe { cstr_or_empty(out.as_ptr()) }.to_string())
}

// ---- devices -----------------------------------------------------------------------------

/// Number of CUDA devices; `Err(Status::CudaUnavailable)` without a driver.
pub fn device_count() -> Result<i32> {
    let mut n: c_int = 0;
    check(unsafe { sys::kjit_device_count(&mut n) })?;
    Ok(n)
}

type DeviceStringFn = unsafe extern "C" fn(c_int, *mut c_char, usize) -> c_int;

fn device_string(f: DeviceStringFn, device: i32) -> Result<String> {
    let mut buf = [0 as c_char; 256];
    check(unsafe { f(device, buf.as_mut_ptr(), buf.len()) })?;
    Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned())
}

/// Exact architecture of a device as an NVRTC target, e.g. "sm_90".
pub fn device_arch(device: i32) -> Result<String> {
    device_string(sys::kjit_device_arch, device)
}

/// Device name, e.g. "NVIDIA H200".
pub fn device_name(device: i32) -> Result<String> {
    device_string(sys::kjit_device_name, device)
}

/// CUDA driver version, e.g. 13000.
pub fn driver_version() -> Result<i32> {
    let mut v: c_int = 0;
    check(unsafe { sys::kjit_driver_version(&mut v) })?;
    Ok(v)
}

// ---- cache -------------------------------------------------------------------------------

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
    raw: *mut sys::kjit_cache,
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

// ---- options -----------------------------------------------------------------------------

/// Outputs of a compile (bit mask of `KJIT_OUTPUT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Outputs(pub u32);

impl Outputs {
    pub const DEFAULT: Outputs = Outputs(0);
    pub const PTX: Outputs = Outputs(sys::KJIT_OUTPUT_PTX);
    pub const CUBIN: Outputs = Outputs(sys::KJIT_OUTPUT_CUBIN);
    pub const LTOIR: Outputs = Outputs(sys::KJIT_OUTPUT_LTOIR);
}

impl std::ops::BitOr for Outputs {
    type Output = Outputs;
    fn bitor(self, rhs: Outputs) -> Outputs {
        Outputs(self.0 | rhs.0)
    }
}

/// Compile options builder (`kjit_options`). Setters return `&mut Self` for chaining:
/// `opts.target("sm_90")?.add("-std=c++17")?.define("N", Some("4"))?;`
pub struct Options {
    raw: *mut sys::kjit_options,
}

// The C API: a builder may be read by any number of concurrent compiles but must not be
// modified meanwhile: reads take &self, writes take &mut self.
unsafe impl Send for Options {}
unsafe impl Sync for Options {}

impl Options {
    /// Empty builder: target "auto", default outputs, program name "kernel.cu".
    pub fn new() -> Result<Options> {
        let mut raw = ptr::null_mut();
        check(unsafe { sys::kjit_options_create(&mut raw) })?;
        Ok(Options { raw })
    }

    /// Deep copy.
    pub fn try_clone(&self) -> Result<Options> {
        let mut raw = ptr::null_mut();
        check(unsafe { sys::kjit_options_clone(self.raw, &mut raw) })?;
        Ok(Options { raw })
    }

    pub fn as_raw(&self) -> *mut sys::kjit_options {
        self.raw
    }

    /// "sm_90", "sm_90a", "compute_90", or "auto".
    pub fn target(&mut self, target: &str) -> Result<&mut Self> {
        let t = cstring("target", target)?;
        check(unsafe { sys::kjit_options_set_target(self.raw, t.as_ptr()) })?;
        Ok(self)
    }

    /// Device whose architecture target "auto" resolves to (default 0).
    pub fn device(&mut self, device: i32) -> Result<&mut Self> {
        check(unsafe { sys::kjit_options_set_device(self.raw, device) })?;
        Ok(self)
    }

    pub fn outputs(&mut self, outputs: Outputs) -> Result<&mut Self> {
        check(unsafe { sys::kjit_options_set_outputs(self.raw, outputs.0) })?;
        Ok(self)
    }

    /// Program name (appears in the log and `__FILE__`).
    pub fn name(&mut self, name: &str) -> Result<&mut Self> {
        let n = cstring("name", name)?;
        check(unsafe { sys::kjit_options_set_name(self.raw, n.as_ptr()) })?;
        Ok(self)
    }

    /// The CUDA toolkit whose headers (`<cuda_fp16.h>`, `<cub/...>` ...) NVRTC finds
    /// without an include option: `None` finds it automatically (the default), `Some("")`
    /// turns it off, `Some(root)` names a toolkit root.
    pub fn toolkit(&mut self, root: Option<&str>) -> Result<&mut Self> {
        match root {
            None => check(unsafe { sys::kjit_options_set_toolkit(self.raw, std::ptr::null()) })?,
            Some(r) => {
                let c = cstring("toolkit root", r)?;
                check(unsafe { sys::kjit_options_set_toolkit(self.raw, c.as_ptr()) })?
            }
        }
        Ok(self)
    }

    /// Automatic precompiled headers for programs whose includes reach the toolkit
    /// (default on; results are byte-identical either way).
    pub fn pch(&mut self, enabled: bool) -> Result<&mut Self> {
        check(unsafe { sys::kjit_options_set_pch(self.raw, enabled as c_int) })?;
        Ok(self)
    }

    /// One raw NVRTC option, e.g. "-std=c++17".
    pub fn add(&mut self, option: &str) -> Result<&mut Self> {
        let o = cstring("option", option)?;
        check(unsafe { sys::kjit_options_add(self.raw, o.as_ptr()) })?;
        Ok(self)
    }

    /// "-D<name>" or "-D<name>=<value>".
    pub fn define(&mut self, name: &str, value: Option<&str>) -> Result<&mut Self> {
        let n = cstring("define name", name)?;
        let v = value.map(|v| cstring("define value", v)).transpose()?;
        check(unsafe {
            sys::kjit_options_add_define(
                self.raw,
                n.as_ptr(),
                v.as_ref().map_or(ptr::null(), |v| v.as_ptr()),
            )
        })?;
        Ok(self)
    }

    /// "-I<path>"; files reachable through it are hashed into the cache key.
    pub fn include_path(&mut self, path: impl AsRef<Path>) -> Result<&mut Self> {
        let p = path_cstring("include path", path.as_ref())?;
        check(unsafe { sys::kjit_options_add_include_path(self.raw, p.as_ptr()) })?;
        Ok(self)
    }

    /// In-memory header: `#include "<name>"` resolves to `contents`.
    pub fn header(&mut self, name: &str, contents: &str) -> Result<&mut Self> {
        let n = cstring("header name", name)?;
        let c = code_cstring("header contents", contents)?;
        check(unsafe { sys::kjit_options_add_header(self.raw, n.as_ptr(), c.as_ptr()) })?;
        Ok(self)
    }

    /// Name expression, e.g. "my_kernel<float, 256>".
    pub fn name_expression(&mut self, expr: &str) -> Result<&mut Self> {
        let e = cstring("name expression", expr)?;
        check(unsafe { sys::kjit_options_add_name_expression(self.raw, e.as_ptr()) })?;
        Ok(self)
    }
}

impl Drop for Options {
    fn drop(&mut self) {
        unsafe { sys::kjit_options_destroy(self.raw) }
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options").field("raw", &self.raw).finish()
    }
}

fn opts_ptr(opts: Option<&Options>) -> *const sys::kjit_options {
    opts.map_or(ptr::null(), |o| o.raw as *const _)
}

// ---- compiler ----------------------------------------------------------------------------

/// NVRTC front end (`kjit_compiler`). With a cache, every compile goes through it; the
/// borrow makes sure the cache outlives the compiler.
pub struct Compiler<'c> {
    raw: *mut sys::kjit_compiler,
    _cache: PhantomData<&'c Cache>,
}

// The C API: "a compiler may be used from any number of threads at once".
unsafe impl Send for Compiler<'_> {}
unsafe impl Sync for Compiler<'_> {}

/// Turns a compile's (status, binary) into a Result; on a compile error the binary's log
/// goes into the error and the binary is freed.
fn compile_result(code: c_int, out: *mut sys::kjit_binary) -> Result<Binary> {
    if code == sys::KJIT_OK {
        return Ok(Binary { raw: out });
    }
    let mut err = Error::last(code);
    if !out.is_null() {
        let b = Binary { raw: out };
        err.log = b.log().to_string();
    }
    Err(err)
}

impl<'c> Compiler<'c> {
    /// `threads` bounds the worker pool of async/many compiles (0 = CPU cores).
    pub fn new(cache: Option<&'c Cache>, threads: u32) -> Result<Compiler<'c>> {
        let mut raw = ptr::null_mut();
        let c = cache.map_or(ptr::null_mut(), |c| c.raw);
        check(unsafe { sys::kjit_compiler_create(c, threads, &mut raw) })?;
        Ok(Compiler {
            raw,
            _cache: PhantomData,
        })
    }

    pub fn as_raw(&self) -> *mut sys::kjit_compiler {
        self.raw
    }

    /// Compiles (or hits the cache). A compile error is `Err` with `status() ==
    /// Status::Compile` and NVRTC's log in `log()`.
    pub fn compile(&self, source: &str, opts: Option<&Options>) -> Result<Binary> {
        let src = code_cstring("source", source)?;
        let mut out = ptr::null_mut();
        let code = unsafe { sys::kjit_compile(self.raw, src.as_ptr(), opts_ptr(opts), &mut out) };
        compile_result(code, out)
    }

    /// Starts a compile on the worker pool.
    pub fn compile_async(&self, source: &str, opts: Option<&Options>) -> Result<PendingCompile> {
        let src = code_cstring("source", source)?;
        let mut out = ptr::null_mut();
        check(unsafe {
            sys::kjit_compile_async(self.raw, src.as_ptr(), opts_ptr(opts), &mut out)
        })?;
        Ok(PendingCompile { raw: out })
    }

    /// Compiles all `sources` in parallel; `opts` is `None` (defaults for all) or one entry
    /// per source. Returns one result per source, in order. Argument errors (detected
    /// before anything runs) are returned as the outer `Err`.
    pub fn compile_many(
        &self,
        sources: &[&str],
        opts: Option<&[Option<&Options>]>,
    ) -> Result<Vec<Result<Binary>>> {
        if let Some(o) = opts {
            if o.len() != sources.len() {
                return Err(Error::local(
                    Status::InvalidArgument,
                    format!("{} sources but {} options", sources.len(), o.len()),
                ));
            }
        }
        let owned = sources
            .iter()
            .map(|s| code_cstring("source", s))
            .collect::<Result<Vec<_>>>()?;
        let src_ptrs: Vec<*const c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        let opt_ptrs: Option<Vec<*const sys::kjit_options>> =
            opts.map(|o| o.iter().map(|x| opts_ptr(*x)).collect());
        let mut outs: Vec<*mut sys::kjit_binary> = vec![ptr::null_mut(); sources.len()];
        let mut statuses: Vec<c_int> = vec![0; sources.len()];
        let code = unsafe {
            sys::kjit_compile_many(
                self.raw,
                sources.len(),
                src_ptrs.as_ptr(),
                opt_ptrs.as_ref().map_or(ptr::null(), |v| v.as_ptr()),
                outs.as_mut_ptr(),
                statuses.as_mut_ptr(),
            )
        };
        let message = unsafe { cstr_or_empty(sys::kjit_last_error()) }.to_string();
        // Argument errors: nothing ran, no item status was written.
        if code != sys::KJIT_OK
            && statuses.iter().all(|&s| s == sys::KJIT_OK)
            && outs.iter().all(|p| p.is_null())
        {
            return Err(Error {
                status: Status::from_raw(code),
                message,
                log: String::new(),
            });
        }
        // The message belongs to the first failed item, whose status the call returned.
        let first_failed = statuses.iter().position(|&s| s != sys::KJIT_OK);
        Ok(outs
            .into_iter()
            .zip(statuses)
            .enumerate()
            .map(|(i, (out, st))| {
                if st == sys::KJIT_OK {
                    Ok(Binary { raw: out })
                } else {
                    let msg = if Some(i) == first_failed {
                        message.clone()
                    } else {
                        String::new()
                    };
                    let mut e = Error {
                        status: Status::from_raw(st),
                        message: msg,
                        log: String::new(),
                    };
                    if !out.is_null() {
                        e.log = Binary { raw: out }.log().to_string();
                    }
                    Err(e)
                }
            })
            .collect())
    }

    /// Compiles-or-hits `source` for `device` and loads the kernel `name` (an extern "C"
    /// name, a mangled name, or a name expression).
    pub fn kernel(
        &self,
        source: &str,
        name: &str,
        opts: Option<&Options>,
        device: i32,
        flags: KernelFlags,
    ) -> Result<Kernel> {
        let src = code_cstring("source", source)?;
        let n = cstring("kernel name", name)?;
        let mut out = ptr::null_mut();
        let mut log = ptr::null_mut();
        let code = unsafe {
            sys::kjit_kernel_create(
                self.raw,
                src.as_ptr(),
                n.as_ptr(),
                opts_ptr(opts),
                device,
                flags.0,
                &mut out,
                &mut log,
            )
        };
        if code == sys::KJIT_OK {
            if !log.is_null() {
                unsafe { sys::kjit_binary_destroy(log) };
            }
            return Ok(Kernel { raw: out });
        }
        let mut err = Error::last(code);
        if !log.is_null() {
            err.log = Binary { raw: log }.log().to_string();
        }
        Err(err)
    }
}

impl Drop for Compiler<'_> {
    fn drop(&mut self) {
        unsafe { sys::kjit_compiler_destroy(self.raw) }
    }
}

impl fmt::Debug for Compiler<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Compiler").field("raw", &self.raw).finish()
    }
}

/// A compile running on the compiler's worker pool (`kjit_future`). Dropping it cancels
/// the compile if it is still running.
pub struct PendingCompile {
    raw: *mut sys::kjit_future,
}

// The C API: thread-safe with respect to cancel; one waiter at a time (wait takes &mut).
unsafe impl Send for PendingCompile {}
unsafe impl Sync for PendingCompile {}

impl PendingCompile {
    /// Waits up to `timeout` (`None` = forever). `Status::Timeout` when not done yet; the
    /// result can be taken once.
    pub fn wait(&mut self, timeout: Option<Duration>) -> Result<Binary> {
        let ms: i64 = match timeout {
            None => -1,
            Some(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        };
        let mut out = ptr::null_mut();
        let code = unsafe { sys::kjit_future_wait(self.raw, ms, &mut out) };
        compile_result(code, out)
    }

    /// True when `wait` would not block.
    pub fn is_ready(&self) -> bool {
        unsafe { sys::kjit_future_ready(self.raw) == 1 }
    }

    /// Asks the compile to stop.
    pub fn cancel(&self) -> Result<()> {
        check(unsafe { sys::kjit_future_cancel(self.raw) })
    }
}

impl Drop for PendingCompile {
    fn drop(&mut self) {
        unsafe { sys::kjit_future_destroy(self.raw) }
    }
}

impl fmt::Debug for PendingCompile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingCompile")
            .field("ready", &self.is_ready())
            .finish()
    }
}

// ---- binaries ----------------------------------------------------------------------------

/// Where a binary came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// NVRTC ran for this request.
    Compiled,
    /// In-process memory tier hit.
    Memory,
    /// SQLite tier hit (this or another process compiled it).
    Disk,
    /// Remote tier hit.
    Remote,
    Other(i32),
}

/// A compiled result (`kjit_binary`): immutable, freed on drop.
pub struct Binary {
    raw: *mut sys::kjit_binary,
}

// The C API: binaries are immutable and every accessor is thread-safe.
unsafe impl Send for Binary {}
unsafe impl Sync for Binary {}

impl Binary {
    pub fn as_raw(&self) -> *mut sys::kjit_binary {
        self.raw
    }

    /// Bytes of one output, `None` when the binary has none.
    pub fn data(&self, kind: Outputs) -> Option<&[u8]> {
        let mut size = 0usize;
        let p = unsafe { sys::kjit_binary_data(self.raw, kind.0 as c_int, &mut size) };
        if p.is_null() {
            None
        } else {
            Some(unsafe { std::slice::from_raw_parts(p as *const u8, size) })
        }
    }

    /// PTX text.
    pub fn ptx(&self) -> Option<&str> {
        self.data(Outputs::PTX)
            .and_then(|b| std::str::from_utf8(b).ok())
    }

    pub fn cubin(&self) -> Option<&[u8]> {
        self.data(Outputs::CUBIN)
    }

    pub fn ltoir(&self) -> Option<&[u8]> {
        self.data(Outputs::LTOIR)
    }

    /// NVRTC's log (warnings on success).
    pub fn log(&self) -> &str {
        unsafe { cstr_or_empty(sys::kjit_binary_log(self.raw)) }
    }

    /// Exact target compiled for, e.g. "sm_90".
    pub fn target(&self) -> &str {
        unsafe { cstr_or_empty(sys::kjit_binary_target(self.raw)) }
    }

    /// Cache key: 64 lowercase hex digits.
    pub fn key(&self) -> &str {
        unsafe { cstr_or_empty(sys::kjit_binary_key(self.raw)) }
    }

    pub fn tier(&self) -> Tier {
        match unsafe { sys::kjit_binary_tier(self.raw) } {
            0 => Tier::Compiled,
            1 => Tier::Memory,
            2 => Tier::Disk,
            3 => Tier::Remote,
            n => Tier::Other(n),
        }
    }

    /// Milliseconds NVRTC took when this result was first compiled.
    pub fn compile_ms(&self) -> f64 {
        unsafe { sys::kjit_binary_compile_ms(self.raw) }
    }

    /// Lowered (mangled) name of a name expression given at compile time.
    pub fn lowered_name(&self, expr: &str) -> Option<&str> {
        let e = CString::new(expr).ok()?;
        unsafe { cstr_opt(sys::kjit_binary_lowered_name(self.raw, e.as_ptr())) }
    }

    /// (name expression, lowered name) pairs, in order.
    pub fn name_expressions(&self) -> Vec<(&str, &str)> {
        let n = unsafe { sys::kjit_binary_name_count(self.raw) };
        (0..n)
            .map(|i| unsafe {
                (
                    cstr_or_empty(sys::kjit_binary_name_expression(self.raw, i)),
                    cstr_or_empty(sys::kjit_binary_lowered_name_at(self.raw, i)),
                )
            })
            .collect()
    }

    /// `__global__` entry points found in the PTX, in order.
    pub fn kernel_names(&self) -> Vec<&str> {
        let n = unsafe { sys::kjit_binary_kernel_count(self.raw) };
        (0..n)
            .map(|i| unsafe { cstr_or_empty(sys::kjit_binary_kernel_name(self.raw, i)) })
            .collect()
    }

    /// Metadata as a JSON object.
    pub fn metadata_json(&self) -> &str {
        unsafe { cstr_or_empty(sys::kjit_binary_metadata_json(self.raw)) }
    }

    /// Loads kernel `name` from this binary onto `device`.
    pub fn load(&self, name: &str, device: i32, flags: KernelFlags) -> Result<Kernel> {
        let n = cstring("kernel name", name)?;
        let mut out = ptr::null_mut();
        check(unsafe {
            sys::kjit_kernel_from_binary(self.raw, n.as_ptr(), device, flags.0, &mut out)
        })?;
        Ok(Kernel { raw: out })
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        unsafe { sys::kjit_binary_destroy(self.raw) }
    }
}

impl fmt::Debug for Binary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Binary")
            .field("key", &self.key())
            .field("target", &self.target())
            .field("tier", &self.tier())
            .finish()
    }
}

// ---- kernels -----------------------------------------------------------------------------

/// `KJIT_KERNEL_*` flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KernelFlags(pub u32);

impl KernelFlags {
    pub const DEFAULT: KernelFlags = KernelFlags(sys::KJIT_KERNEL_DEFAULT);
    /// Fail with `Status::StaleHandle` instead of reloading after a context reset.
    pub const NO_RELOAD: KernelFlags = KernelFlags(sys::KJIT_KERNEL_NO_RELOAD);
    /// Load PTX through the driver JIT even when a CUBIN is available.
    pub const FORCE_PTX: KernelFlags = KernelFlags(sys::KJIT_KERNEL_FORCE_PTX);
}

impl std::ops::BitOr for KernelFlags {
    type Output = KernelFlags;
    fn bitor(self, rhs: KernelFlags) -> KernelFlags {
        KernelFlags(self.0 | rhs.0)
    }
}

/// How a kernel's code was loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadPath {
    Cubin,
    Ptx,
    Other(i32),
}

/// Kernel attributes (`kjit_kernel_attributes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KernelAttributes {
    pub num_regs: i32,
    pub static_shared_bytes: i32,
    pub const_bytes: i32,
    pub local_bytes: i32,
    pub max_threads_per_block: i32,
    pub max_dynamic_shared_bytes: i32,
    pub ptx_version: i32,
    pub binary_version: i32,
}

/// Launch configuration. `Default`: one block of one thread on the legacy default stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
    /// A `CUstream` / `cudaStream_t`; null = the legacy default stream.
    pub stream: *mut c_void,
    /// Thread-block cluster dims (sm_90+); [0, 0, 0] = none.
    pub cluster: [u32; 3],
    pub cooperative: bool,
}

// The stream is an opaque driver handle that Rust never dereferences.
unsafe impl Send for LaunchConfig {}
unsafe impl Sync for LaunchConfig {}

impl Default for LaunchConfig {
    fn default() -> Self {
        LaunchConfig {
            grid: [1, 1, 1],
            block: [1, 1, 1],
            shared_bytes: 0,
            stream: ptr::null_mut(),
            cluster: [0, 0, 0],
            cooperative: false,
        }
    }
}

impl LaunchConfig {
    /// A 1-D launch: `grid` blocks of `block` threads.
    pub fn linear(grid: u32, block: u32) -> LaunchConfig {
        LaunchConfig {
            grid: [grid, 1, 1],
            block: [block, 1, 1],
            ..Default::default()
        }
    }

    /// Enough blocks of `block` threads to cover `n` elements.
    pub fn for_elements(n: u32, block: u32) -> LaunchConfig {
        let b = block.max(1);
        Self::linear((n / b + u32::from(n % b != 0)).max(1), block)
    }

    pub fn with_stream(mut self, stream: *mut c_void) -> LaunchConfig {
        self.stream = stream;
        self
    }

    pub fn with_shared_bytes(mut self, bytes: u32) -> LaunchConfig {
        self.shared_bytes = bytes;
        self
    }

    fn to_c(self) -> sys::kjit_launch_config {
        sys::kjit_launch_config {
            struct_size: std::mem::size_of::<sys::kjit_launch_config>() as u32,
            grid: self.grid,
            block: self.block,
            shared_bytes: self.shared_bytes,
            stream: self.stream,
            cluster: self.cluster,
            cooperative: self.cooperative as c_int,
        }
    }
}

/// A value that can be passed as a kernel parameter: its bytes are handed to the driver
/// as they are, and the library checks their size against the kernel's parameter.
///
/// # Safety
/// `arg_ptr` must point at `arg_size` readable bytes that stay valid while `self` is
/// borrowed, holding the value exactly as the kernel's parameter type lays it out.
pub unsafe trait KernelArg {
    fn arg_ptr(&self) -> *const c_void;
    fn arg_size(&self) -> usize;
}

macro_rules! kernel_arg_by_value {
    ($($t:ty),*) => {$(
        unsafe impl KernelArg for $t {
            #[inline]
            fn arg_ptr(&self) -> *const c_void { self as *const $t as *const c_void }
            #[inline]
            fn arg_size(&self) -> usize { std::mem::size_of::<$t>() }
        }
    )*};
}
kernel_arg_by_value!(i8, i16, i32, i64, u8, u16, u32, u64, isize, usize, f32, f64, bool);

/// A device address (`CUdeviceptr`), e.g. from `cuMemAlloc` or another CUDA library.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DevicePtr(pub u64);
kernel_arg_by_value!(DevicePtr);

unsafe impl<T> KernelArg for *const T {
    #[inline]
    fn arg_ptr(&self) -> *const c_void {
        self as *const *const T as *const c_void
    }
    #[inline]
    fn arg_size(&self) -> usize {
        std::mem::size_of::<*const T>()
    }
}

unsafe impl<T> KernelArg for *mut T {
    #[inline]
    fn arg_ptr(&self) -> *const c_void {
        self as *const *mut T as *const c_void
    }
    #[inline]
    fn arg_size(&self) -> usize {
        std::mem::size_of::<*mut T>()
    }
}

/// Arrays of kernel args by value, e.g. a `float4` passed as `[f32; 4]`.
unsafe impl<T: KernelArg + Copy, const N: usize> KernelArg for [T; N] {
    #[inline]
    fn arg_ptr(&self) -> *const c_void {
        self.as_ptr() as *const c_void
    }
    #[inline]
    fn arg_size(&self) -> usize {
        std::mem::size_of::<[T; N]>()
    }
}

/// Builds the argument list of [`Kernel::launch`]: `kjit::args![n, a, x, y]`.
#[macro_export]
macro_rules! args {
    ($($a:expr),* $(,)?) => { &[$(&$a as &dyn $crate::KernelArg),*] };
}

/// One parameter's place in the packed parameter buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamInfo {
    pub offset: usize,
    pub size: usize,
}

/// A loaded, launchable kernel (`kjit_kernel`), destroyed on drop.
pub struct Kernel {
    raw: *mut sys::kjit_kernel,
}

// The C API: "handles may be shared between threads"; "any number of threads may launch
// the same handle at once". Destroy (Drop) has exclusive access; set_max_dynamic_shared,
// which changes the function's attribute, takes &mut self.
unsafe impl Send for Kernel {}
unsafe impl Sync for Kernel {}

const STACK_ARGS: usize = 32;

impl Kernel {
    pub fn as_raw(&self) -> *mut sys::kjit_kernel {
        self.raw
    }

    pub fn load_path(&self) -> LoadPath {
        match unsafe { sys::kjit_kernel_load_path(self.raw) } {
            0 => LoadPath::Cubin,
            1 => LoadPath::Ptx,
            n => LoadPath::Other(n),
        }
    }

    /// Mangled symbol of the loaded function.
    pub fn symbol(&self) -> &str {
        unsafe { cstr_or_empty(sys::kjit_kernel_symbol(self.raw)) }
    }

    pub fn param_count(&self) -> Result<usize> {
        let mut n = 0usize;
        check(unsafe { sys::kjit_kernel_param_count(self.raw, &mut n) })?;
        Ok(n)
    }

    pub fn param_info(&self, index: usize) -> Result<ParamInfo> {
        let (mut offset, mut size) = (0usize, 0usize);
        check(unsafe { sys::kjit_kernel_param_info(self.raw, index, &mut offset, &mut size) })?;
        Ok(ParamInfo { offset, size })
    }

    /// Total bytes of the packed parameter buffer.
    pub fn param_buffer_size(&self) -> Result<usize> {
        let mut n = 0usize;
        check(unsafe { sys::kjit_kernel_param_buffer_size(self.raw, &mut n) })?;
        Ok(n)
    }

    pub fn attributes(&self) -> Result<KernelAttributes> {
        let mut a = sys::kjit_kernel_attributes {
            struct_size: std::mem::size_of::<sys::kjit_kernel_attributes>() as u32,
            ..Default::default()
        };
        check(unsafe { sys::kjit_kernel_get_attributes(self.raw, &mut a) })?;
        Ok(KernelAttributes {
            num_regs: a.num_regs,
            static_shared_bytes: a.static_shared_bytes,
            const_bytes: a.const_bytes,
            local_bytes: a.local_bytes,
            max_threads_per_block: a.max_threads_per_block,
            max_dynamic_shared_bytes: a.max_dynamic_shared_bytes,
            ptx_version: a.ptx_version,
            binary_version: a.binary_version,
        })
    }

    /// Raises the kernel's maximum dynamic shared memory.
    pub fn set_max_dynamic_shared(&mut self, bytes: i32) -> Result<()> {
        check(unsafe { sys::kjit_kernel_set_max_dynamic_shared(self.raw, bytes) })
    }

    /// Maximum active blocks per SM.
    pub fn occupancy(&self, block_size: i32, dynamic_shared: usize) -> Result<i32> {
        let mut n: c_int = 0;
        check(unsafe { sys::kjit_kernel_occupancy(self.raw, block_size, dynamic_shared, &mut n) })?;
        Ok(n)
    }

    /// (minimum grid to fill the device, block size that maximises occupancy).
    pub fn suggest_block_size(&self, dynamic_shared: usize) -> Result<(i32, i32)> {
        let (mut grid, mut block): (c_int, c_int) = (0, 0);
        check(unsafe {
            sys::kjit_kernel_suggest_block_size(self.raw, dynamic_shared, &mut grid, &mut block)
        })?;
        Ok((grid, block))
    }

    /// A zeroed packed parameter buffer laid out for this kernel.
    pub fn param_buffer(&self) -> Result<ParamBuffer> {
        let n = self.param_count()?;
        let params = (0..n)
            .map(|i| self.param_info(i))
            .collect::<Result<Vec<_>>>()?;
        let size = self.param_buffer_size()?;
        Ok(ParamBuffer {
            params,
            bytes: vec![0u8; size],
            next: 0,
        })
    }

    /// Launches with one argument per kernel parameter; the library checks the count and
    /// each size (`Status::ArgumentMismatch`). Asynchronous on `cfg.stream`.
    ///
    /// # Safety
    /// The kernel runs arbitrary device code: device pointers among `args` must be valid
    /// for what the kernel does with them, and the memory must stay alive until the
    /// launch completes on the stream.
    pub unsafe fn launch(&self, cfg: &LaunchConfig, args: &[&dyn KernelArg]) -> Result<()> {
        let c = cfg.to_c();
        let n = args.len();
        if n <= STACK_ARGS {
            let mut ptrs = [ptr::null_mut::<c_void>(); STACK_ARGS];
            let mut sizes = [0usize; STACK_ARGS];
            for (i, a) in args.iter().enumerate() {
                ptrs[i] = a.arg_ptr() as *mut c_void;
                sizes[i] = a.arg_size();
            }
            check(sys::kjit_kernel_launch_sized(
                self.raw,
                &c,
                ptrs.as_mut_ptr(),
                sizes.as_ptr(),
                n,
            ))
        } else {
            let mut ptrs: Vec<*mut c_void> =
                args.iter().map(|a| a.arg_ptr() as *mut c_void).collect();
            let sizes: Vec<usize> = args.iter().map(|a| a.arg_size()).collect();
            check(sys::kjit_kernel_launch_sized(
                self.raw,
                &c,
                ptrs.as_mut_ptr(),
                sizes.as_ptr(),
                n,
            ))
        }
    }

    /// `cuLaunchKernel`-style launch: `args[i]` points at the value of parameter `i`; the
    /// library checks only the count.
    ///
    /// # Safety
    /// As [`launch`](Kernel::launch), and every pointer must point at a value of the
    /// parameter's exact size.
    pub unsafe fn launch_raw(&self, cfg: &LaunchConfig, args: &mut [*mut c_void]) -> Result<()> {
        let c = cfg.to_c();
        check(sys::kjit_kernel_launch(
            self.raw,
            &c,
            args.as_mut_ptr(),
            args.len(),
        ))
    }

    /// Launches with one packed parameter buffer (see [`param_buffer`](Kernel::param_buffer));
    /// its size must equal [`param_buffer_size`](Kernel::param_buffer_size).
    ///
    /// # Safety
    /// As [`launch`](Kernel::launch).
    pub unsafe fn launch_packed(&self, cfg: &LaunchConfig, buffer: &[u8]) -> Result<()> {
        let c = cfg.to_c();
        check(sys::kjit_kernel_launch_packed(
            self.raw,
            &c,
            buffer.as_ptr() as *const c_void,
            buffer.len(),
        ))
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        unsafe { sys::kjit_kernel_destroy(self.raw) }
    }
}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kernel")
            .field("symbol", &self.symbol())
            .finish()
    }
}

/// A packed parameter buffer laid out by a kernel's parameter offsets, for
/// [`Kernel::launch_packed`]. Values are written with [`push`](ParamBuffer::push) (in
/// parameter order) or [`set`](ParamBuffer::set); each value's size must equal its
/// parameter's size.
#[derive(Debug, Clone)]
pub struct ParamBuffer {
    params: Vec<ParamInfo>,
    bytes: Vec<u8>,
    next: usize,
}

impl ParamBuffer {
    /// Writes parameter `index`.
    pub fn set<T: KernelArg + ?Sized>(&mut self, index: usize, value: &T) -> Result<&mut Self> {
        let p = *self.params.get(index).ok_or_else(|| {
            Error::local(
                Status::ArgumentMismatch,
                format!(
                    "parameter {index} does not exist: the kernel has {}",
                    self.params.len()
                ),
            )
        })?;
        let size = value.arg_size();
        if size != p.size {
            return Err(Error::local(
                Status::ArgumentMismatch,
                format!(
                    "parameter {index}: the kernel expects {} bytes, the value has {size}",
                    p.size
                ),
            ));
        }
        let src = unsafe { std::slice::from_raw_parts(value.arg_ptr() as *const u8, size) };
        self.bytes[p.offset..p.offset + size].copy_from_slice(src);
        Ok(self)
    }

    /// Writes the next parameter (0, 1, 2, ... in call order).
    pub fn push<T: KernelArg + ?Sized>(&mut self, value: &T) -> Result<&mut Self> {
        let i = self.next;
        self.set(i, value)?;
        self.next = i + 1;
        Ok(self)
    }

    /// Parameter layout of the kernel.
    pub fn params(&self) -> &[ParamInfo] {
        &self.params
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
}

// ---- GEMM (cuBLASLt) -----------------------------------------------------------------------

/// One GEMM problem (`kjit_gemm_desc`, see `include/kjit/gemm.h`). Start from
/// [`gemm_desc`] (the library's defaults) and set at least `m`, `n`, `k` and `a_type`.
pub type GemmDesc = sys::kjit_gemm_desc;

/// Counters of a [`Gemm`] handle (`kjit_gemm_stats`).
pub type GemmStats = sys::kjit_gemm_stats;

/// `KJIT_GEMM_DESC_INIT`: column-major, no transposes, alpha 1, beta 0, one batch.
pub fn gemm_desc() -> GemmDesc {
    GemmDesc::INIT
}

/// Options of [`Gemm::new`]; zeros mean the library's defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GemmOptions {
    /// Plans kept in memory (LRU); 0 = 64.
    pub plan_capacity: u32,
    /// On a plan miss, time the best candidates on the real buffers and keep the fastest.
    pub autotune: bool,
    pub autotune_candidates: u32,
    pub autotune_warmup: u32,
    pub autotune_reps: u32,
    /// Workspace cap per stream; 0 = 32 MiB.
    pub max_workspace_bytes: u64,
}

fn opt_ptr(p: Option<DevicePtr>) -> *const c_void {
    p.map_or(ptr::null(), |p| p.0 as usize as *const c_void)
}

/// Checks a GEMM problem and its pointers without a GPU (pointers are only compared with
/// null and checked for alignment).
pub fn gemm_check(
    desc: &GemmDesc,
    a: DevicePtr,
    b: DevicePtr,
    c: Option<DevicePtr>,
    d: DevicePtr,
    bias: Option<DevicePtr>,
) -> Result<()> {
    check(unsafe {
        sys::kjit_gemm_check(
            desc,
            opt_ptr(Some(a)),
            opt_ptr(Some(b)),
            opt_ptr(c),
            opt_ptr(Some(d)),
            opt_ptr(bias),
        )
    })
}

/// cuBLASLt's run-time version, e.g. 130100 (loads cuBLASLt if needed).
pub fn cublaslt_version() -> Result<usize> {
    let mut v = 0usize;
    check(unsafe { sys::kjit_cublaslt_version(&mut v) })?;
    Ok(v)
}

/// A cuBLASLt GEMM handle with a plan cache (`kjit_gemm`), persisted in the cache it was
/// created with. Destroyed on drop (which waits for its enqueued GEMMs).
pub struct Gemm<'c> {
    raw: *mut sys::kjit_gemm,
    _cache: PhantomData<&'c Cache>,
}

// The C API: the handle may be shared by threads and any number of them may run on it at
// once; clear_plans must not race with runs (it takes &mut self).
unsafe impl Send for Gemm<'_> {}
unsafe impl Sync for Gemm<'_> {}

impl<'c> Gemm<'c> {
    /// Creates a handle for `device`; `Status::CudaUnavailable` without a driver or device.
    pub fn new(cache: Option<&'c Cache>, device: i32, opts: &GemmOptions) -> Result<Gemm<'c>> {
        let o = sys::kjit_gemm_options {
            struct_size: std::mem::size_of::<sys::kjit_gemm_options>() as u32,
            plan_capacity: opts.plan_capacity,
            autotune: opts.autotune as c_int,
            autotune_candidates: opts.autotune_candidates,
            autotune_warmup: opts.autotune_warmup,
            autotune_reps: opts.autotune_reps,
            max_workspace_bytes: opts.max_workspace_bytes,
        };
        let mut raw = ptr::null_mut();
        let c = cache.map_or(ptr::null_mut(), |c| c.raw);
        check(unsafe { sys::kjit_gemm_create(c, device, &o, &mut raw) })?;
        Ok(Gemm {
            raw,
            _cache: PhantomData,
        })
    }

    pub fn as_raw(&self) -> *mut sys::kjit_gemm {
        self.raw
    }

    /// Enqueues D = epilogue(alpha * op(A) * op(B) + beta * C) on `stream` (null = the
    /// legacy default stream).
    ///
    /// # Safety
    /// The device pointers must be valid for the problem `desc` describes and stay
    /// allocated until the GEMM completes on the stream.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn run(
        &self,
        desc: &GemmDesc,
        a: DevicePtr,
        b: DevicePtr,
        c: Option<DevicePtr>,
        d: DevicePtr,
        bias: Option<DevicePtr>,
        stream: *mut c_void,
    ) -> Result<()> {
        check(sys::kjit_gemm_run(
            self.raw,
            desc,
            opt_ptr(Some(a)),
            opt_ptr(Some(b)),
            opt_ptr(c),
            d.0 as usize as *mut c_void,
            opt_ptr(bias),
            stream,
        ))
    }

    /// Drops every plan of the memory tier (the cache database keeps its copies).
    pub fn clear_plans(&mut self) -> Result<()> {
        check(unsafe { sys::kjit_gemm_clear_plans(self.raw) })
    }

    pub fn stats(&self) -> Result<GemmStats> {
        let mut s = GemmStats {
            struct_size: std::mem::size_of::<GemmStats>() as u32,
            ..Default::default()
        };
        check(unsafe { sys::kjit_gemm_stats_get(self.raw, &mut s) })?;
        Ok(s)
    }
}

impl Drop for Gemm<'_> {
    fn drop(&mut self) {
        unsafe { sys::kjit_gemm_destroy(self.raw) }
    }
}

impl fmt::Debug for Gemm<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gemm").field("raw", &self.raw).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn handle_types_are_send_and_sync_as_documented() {
        assert_send_sync::<Cache>();
        assert_send_sync::<Options>();
        assert_send_sync::<Compiler<'static>>();
        assert_send_sync::<Binary>();
        assert_send_sync::<PendingCompile>();
        assert_send_sync::<Kernel>();
        assert_send_sync::<Error>();
        assert_send_sync::<Gemm<'static>>();
    }

    #[test]
    fn status_codes_round_trip() {
        for code in (0..=24).chain([99, 1234]) {
            assert_eq!(Status::from_raw(code).raw(), code);
        }
        assert_eq!(Status::from_raw(5), Status::Compile);
        assert_eq!(Status::from_raw(1234), Status::Other(1234));
    }

    #[test]
    fn param_buffer_checks_sizes_and_writes_offsets() {
        let mut b = ParamBuffer {
            params: vec![
                ParamInfo { offset: 0, size: 4 },
                ParamInfo { offset: 8, size: 8 },
            ],
            bytes: vec![0; 16],
            next: 0,
        };
        b.push(&7i32)
            .unwrap()
            .push(&DevicePtr(0x1122334455667788))
            .unwrap();
        assert_eq!(&b.as_bytes()[0..4], &7i32.to_ne_bytes());
        assert_eq!(&b.as_bytes()[8..16], &0x1122334455667788u64.to_ne_bytes());
        let e = b.set(0, &1i64).unwrap_err();
        assert_eq!(e.status(), Status::ArgumentMismatch);
        assert_eq!(
            b.set(2, &1i32).unwrap_err().status(),
            Status::ArgumentMismatch
        );
    }

    #[test]
    fn launch_config_for_elements_rounds_up() {
        let c = LaunchConfig::for_elements(1000, 256);
        assert_eq!(c.grid, [4, 1, 1]);
        assert_eq!(c.block, [256, 1, 1]);
        assert_eq!(LaunchConfig::for_elements(0, 256).grid, [1, 1, 1]);
    }
}
