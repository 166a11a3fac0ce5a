//! The NVRTC front end ([`Compiler`]) and its async compiles ([`PendingCompile`]).

use std::fmt;
use std::marker::PhantomData;
use std::os::raw::{c_char, c_int};
use std::ptr;
use std::sync::Arc;
use std::time::Duration;

use crate::binary::Binary;
use crate::cache::Cache;
use crate::error::{check, Error, Result, Status};
use crate::kernel::{Kernel, KernelFlags};
use crate::options::{opts_ptr, Options};
use crate::sys;
use crate::util::{code_cstring, cstr_or_empty, cstring};

/// NVRTC front end (`kjit_compiler`). With a cache, every compile goes through it; the
/// borrow makes sure the cache outlives the compiler.
pub struct Compiler<'c> {
    raw: *mut sys::kjit_compiler,
    _cache: PhantomData<&'c Cache>,
    /// The cache of an owned compiler ([`Compiler::with_cache`]), dropped after the
    /// compiler is destroyed.
    _shared: Option<Arc<Cache>>,
}

/// A compiler that owns a share of its cache: `'static`, so it can move into
/// `std::thread::spawn` or live in a struct beside the cache. See [`Compiler::with_cache`].
pub type OwnedCompiler = Compiler<'static>;

// The C API: "a compiler may be used from any number of threads at once".
unsafe impl Send for Compiler<'_> {}
unsafe impl Sync for Compiler<'_> {}

/// Turns a compile's (status, binary) into a Result; on a compile error the binary's log
/// goes into the error and the binary is freed.
pub(crate) fn compile_result(code: c_int, out: *mut sys::kjit_binary) -> Result<Binary> {
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
            _shared: None,
        })
    }

    /// The cache this compiler was created with, when it holds a share of it.
    pub fn cache(&self) -> Option<&Arc<Cache>> {
        self._shared.as_ref()
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

impl Compiler<'static> {
    /// A compiler that keeps `cache` alive through an [`Arc`] (as cudarc's handles share
    /// their context) instead of borrowing it: the result is `'static` and `Send`, so it
    /// can move into `std::thread::spawn`, be stored next to the cache in a struct, or be
    /// cloned around through an `Arc<Compiler>`. `threads` as in [`Compiler::new`].
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use kjit::{Cache, CacheOptions, Compiler};
    /// # fn main() -> kjit::Result<()> {
    /// let cache = Cache::open_shared(&CacheOptions::default())?;
    /// let compiler = Compiler::with_cache(Arc::clone(&cache), 0)?;
    /// let worker = std::thread::spawn(move || {
    ///     compiler.compile(r#"extern "C" __global__ void k() {}"#, None).map(|b| b.key().to_string())
    /// });
    /// let key = worker.join().unwrap()?;
    /// # Ok(()) }
    /// ```
    pub fn with_cache(cache: Arc<Cache>, threads: u32) -> Result<OwnedCompiler> {
        let mut raw = ptr::null_mut();
        check(unsafe { sys::kjit_compiler_create(cache.raw, threads, &mut raw) })?;
        Ok(Compiler {
            raw,
            _cache: PhantomData,
            _shared: Some(cache),
        })
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
    pub(crate) raw: *mut sys::kjit_future,
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
