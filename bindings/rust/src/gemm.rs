//! GEMMs through cuBLASLt ([`Gemm`]).

use std::fmt;
use std::marker::PhantomData;
use std::os::raw::{c_int, c_void};
use std::ptr;
use std::sync::Arc;

use crate::cache::Cache;
use crate::devptr::{in_ptr, opt_ptr, out_ptr, struct_size};
use crate::error::{check, Result};
use crate::launch::DevicePtr;
use crate::sys;

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
            in_ptr(a),
            in_ptr(b),
            opt_ptr(c),
            in_ptr(d),
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
    /// The cache of an owned handle ([`Gemm::with_cache`]), dropped after the handle.
    _shared: Option<Arc<Cache>>,
}

// The C API: the handle may be shared by threads and any number of them may run on it at
// once; clear_plans must not race with runs (it takes &mut self).
unsafe impl Send for Gemm<'_> {}
unsafe impl Sync for Gemm<'_> {}

impl<'c> Gemm<'c> {
    /// Creates a handle for `device`; `Status::CudaUnavailable` without a driver or device.
    pub fn new(cache: Option<&'c Cache>, device: i32, opts: &GemmOptions) -> Result<Gemm<'c>> {
        Gemm::create(cache.map_or(ptr::null_mut(), |c| c.raw), device, opts, None)
    }

    fn create(
        cache: *mut sys::kjit_cache,
        device: i32,
        opts: &GemmOptions,
        shared: Option<Arc<Cache>>,
    ) -> Result<Gemm<'c>> {
        let o = sys::kjit_gemm_options {
            struct_size: struct_size::<sys::kjit_gemm_options>(),
            plan_capacity: opts.plan_capacity,
            autotune: opts.autotune as c_int,
            autotune_candidates: opts.autotune_candidates,
            autotune_warmup: opts.autotune_warmup,
            autotune_reps: opts.autotune_reps,
            max_workspace_bytes: opts.max_workspace_bytes,
        };
        let mut raw = ptr::null_mut();
        check(unsafe { sys::kjit_gemm_create(cache, device, &o, &mut raw) })?;
        Ok(Gemm {
            raw,
            _cache: PhantomData,
            _shared: shared,
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
            in_ptr(a),
            in_ptr(b),
            opt_ptr(c),
            out_ptr(d),
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
            struct_size: struct_size::<GemmStats>(),
            ..Default::default()
        };
        check(unsafe { sys::kjit_gemm_stats_get(self.raw, &mut s) })?;
        Ok(s)
    }
}

impl Gemm<'static> {
    /// A handle that keeps `cache` alive through an [`Arc`] instead of borrowing it, so it
    /// is `'static` (see [`Compiler::with_cache`](crate::Compiler::with_cache)).
    pub fn with_cache(cache: Arc<Cache>, device: i32, opts: &GemmOptions) -> Result<Gemm<'static>> {
        let raw = cache.raw;
        Gemm::create(raw, device, opts, Some(cache))
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
