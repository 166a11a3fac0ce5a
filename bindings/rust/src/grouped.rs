//! Grouped GEMM for mixture-of-experts layers with kjit's own kernels ([`GroupedGemm`],
//! `include/kjit/grouped_gemm.h`).

use std::fmt;
use std::os::raw::{c_char, c_int, c_void};
use std::ptr;

use crate::binary::Binary;
use crate::compiler::{compile_result, Compiler};
use crate::devptr::{buf_text, in_ptr, opt_ptr, out_ptr, struct_size};
use crate::error::{check, Error, Result, Status};
use crate::launch::DevicePtr;
use crate::sys;
use crate::util::cstring;

/// One grouped GEMM problem (`kjit_grouped_gemm_desc`). Start from [`grouped_desc`] and set
/// `groups`, `rows`, `n`, `k` and `b_order` (`sys::KJIT_GROUPED_B_KN` / `_NK`).
pub type GroupedDesc = sys::kjit_grouped_gemm_desc;

/// `KJIT_GROUPED_GEMM_DESC_INIT`: bf16, B order KN, no activation, alpha 1, beta 0.
pub fn grouped_desc() -> GroupedDesc {
    GroupedDesc::INIT
}

/// Options of [`GroupedGemm::new`]; zeros mean "chosen per shape".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupedOptions {
    /// Tile width of the sm_90a kernel: 0, 128 or 256.
    pub tile_n: u32,
    /// Pipeline stages of the sm_90a kernel: 0 or 2..8.
    pub stages: u32,
    /// Use the portable kernel even on sm_90.
    pub portable_only: bool,
    /// `sys::KJIT_GROUPED_SCHEDULE_*` (0 = chosen per shape).
    pub schedule: i32,
    /// Check every call's offsets on the device; read with
    /// [`GroupedGemm::offsets_status`] (since 0.3).
    pub check_offsets: bool,
    /// Tune the first call of each shape class on its own buffers and persist the fastest
    /// configuration in the compiler's cache (since 0.3).
    pub autotune: bool,
    /// CTAs per thread-block cluster along the rows of the sm_90a kernel: 0 (chosen), 1
    /// or 2 (two CTAs share each copy of B's tile; the cooperative schedule, bf16 inputs)
    /// (since 0.3).
    pub cluster_m: u32,
}

impl GroupedOptions {
    fn to_sys(self) -> sys::kjit_grouped_gemm_options {
        sys::kjit_grouped_gemm_options {
            struct_size: struct_size::<sys::kjit_grouped_gemm_options>(),
            tile_n: self.tile_n,
            stages: self.stages,
            portable_only: self.portable_only as c_int,
            schedule: self.schedule,
            check_offsets: self.check_offsets as c_int,
            autotune: self.autotune as c_int,
            cluster_m: self.cluster_m,
        }
    }
}

/// Compiles (or finds in the cache) the kernel a [`GroupedGemm`] with `opts` on a device of
/// `target` (`"sm_90a"`, `"sm_80"`, ...) would use for `desc`, without a GPU (what `kjit
/// warm --grouped` does).
pub fn grouped_compile(
    compiler: &Compiler<'_>,
    target: &str,
    desc: &GroupedDesc,
    opts: &GroupedOptions,
    with_bias: bool,
) -> Result<Binary> {
    let t = cstring("target", target)?;
    let o = opts.to_sys();
    let mut out = ptr::null_mut();
    let code = unsafe {
        sys::kjit_grouped_gemm_compile(
            compiler.as_raw(),
            t.as_ptr(),
            desc,
            &o,
            with_bias as c_int,
            &mut out,
        )
    };
    compile_result(code, out)
}

/// Checks a problem and its pointers without a GPU (pointers are compared with null and
/// checked for alignment, never read). `offs` is the device array of G cumulative row ends.
#[allow(clippy::too_many_arguments)]
pub fn grouped_check(
    desc: &GroupedDesc,
    a: DevicePtr,
    b: DevicePtr,
    offs: DevicePtr,
    c: Option<DevicePtr>,
    d: DevicePtr,
    bias: Option<DevicePtr>,
) -> Result<()> {
    check(unsafe {
        sys::kjit_grouped_gemm_check(
            desc,
            in_ptr(a),
            in_ptr(b),
            offs.0 as usize as *const i32,
            opt_ptr(c),
            in_ptr(d),
            opt_ptr(bias),
        )
    })
}

/// Checks a scaled call's problem and scale pointers without a GPU, as
/// [`GroupedGemm::run_scaled`] does before it looks at its handle: `Ok` when they are
/// good (pointers compared with null and checked for alignment, never read).
#[allow(clippy::too_many_arguments)]
pub fn grouped_check_scaled(
    desc: &GroupedDesc,
    a: DevicePtr,
    b: DevicePtr,
    offs: DevicePtr,
    c: Option<DevicePtr>,
    d: DevicePtr,
    bias: Option<DevicePtr>,
    scale_a: Option<DevicePtr>,
    scale_b: Option<DevicePtr>,
) -> Result<()> {
    // A null handle: the C call checks everything else first, then answers InvalidHandle,
    // which here means the arguments passed.
    let r = unsafe {
        grouped_run_scaled_raw(
            ptr::null_mut(),
            desc,
            a,
            b,
            offs,
            c,
            d,
            bias,
            scale_a,
            scale_b,
            ptr::null_mut(),
        )
    };
    match r {
        Err(e) if e.status() == Status::InvalidHandle => Ok(()),
        other => other,
    }
}

#[allow(clippy::too_many_arguments)]
unsafe fn grouped_run_scaled_raw(
    gg: *mut sys::kjit_grouped_gemm,
    desc: &GroupedDesc,
    a: DevicePtr,
    b: DevicePtr,
    offs: DevicePtr,
    c: Option<DevicePtr>,
    d: DevicePtr,
    bias: Option<DevicePtr>,
    scale_a: Option<DevicePtr>,
    scale_b: Option<DevicePtr>,
    stream: *mut c_void,
) -> Result<()> {
    if scale_a.is_some() != scale_b.is_some() {
        return Err(Error::local(
            Status::InvalidArgument,
            "scale_a and scale_b come together",
        ));
    }
    check(sys::kjit_grouped_gemm_run_scaled(
        gg,
        desc,
        in_ptr(a),
        in_ptr(b),
        offs.0 as usize as *const i32,
        opt_ptr(c),
        out_ptr(d),
        opt_ptr(bias),
        opt_ptr(scale_a) as *const f32,
        opt_ptr(scale_b) as *const f32,
        stream,
    ))
}

/// A grouped-GEMM handle (`kjit_grouped_gemm`) on one device; its kernels compile through
/// the borrowed [`Compiler`] (its cache, single flight and worker). Destroyed on drop.
pub struct GroupedGemm<'c> {
    raw: *mut sys::kjit_grouped_gemm,
    _compiler: &'c Compiler<'c>,
}

// The C API: the handle may be shared by threads and any number of them may run on it.
unsafe impl Send for GroupedGemm<'_> {}
unsafe impl Sync for GroupedGemm<'_> {}

impl<'c> GroupedGemm<'c> {
    /// Creates a handle for `device`; `Status::CudaUnavailable` without a driver or device.
    pub fn new(compiler: &'c Compiler<'c>, device: i32, opts: &GroupedOptions) -> Result<Self> {
        let o = opts.to_sys();
        let mut raw = ptr::null_mut();
        check(unsafe { sys::kjit_grouped_gemm_create(compiler.as_raw(), device, &o, &mut raw) })?;
        Ok(GroupedGemm {
            raw,
            _compiler: compiler,
        })
    }

    pub fn as_raw(&self) -> *mut sys::kjit_grouped_gemm {
        self.raw
    }

    /// Enqueues `D = act(alpha * A B_g + beta * C + bias_g)` for the rows of every group on
    /// `stream` (null = the legacy default stream).
    ///
    /// # Safety
    /// The device pointers must be valid for the problem `desc` describes and stay
    /// allocated until the work completes on the stream.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn run(
        &self,
        desc: &GroupedDesc,
        a: DevicePtr,
        b: DevicePtr,
        offs: DevicePtr,
        c: Option<DevicePtr>,
        d: DevicePtr,
        bias: Option<DevicePtr>,
        stream: *mut c_void,
    ) -> Result<()> {
        check(sys::kjit_grouped_gemm_run(
            self.raw,
            desc,
            in_ptr(a),
            in_ptr(b),
            offs.0 as usize as *const i32,
            opt_ptr(c),
            out_ptr(d),
            opt_ptr(bias),
            stream,
        ))
    }

    /// [`run`](Self::run) with fp8 e4m3 inputs (`a_type` `sys::KJIT_GEMM_F8_E4M3`) and the
    /// scales of `desc.scale_mode` (`kjit_grouped_gemm_run_scaled`, since 0.3):
    /// `sys::KJIT_GROUPED_SCALE_ROWWISE` takes `scale_a` (`rows` f32) and `scale_b` (G x n
    /// f32, packed); `sys::KJIT_GROUPED_SCALE_BLOCK128` takes `scale_a` (rows x ceil(k/128))
    /// and `scale_b` (G x ceil(n/128) x ceil(k/128)); D stays bf16. Both scales are given
    /// together or not at all (`Status::InvalidArgument` before the C call); the library
    /// checks the rest (a scale pointer null where needed, unaligned, or given with
    /// `KJIT_GROUPED_SCALE_NONE`) before it looks at the handle.
    ///
    /// # Safety
    /// As [`run`](Self::run); the scale arrays must also be valid device memory.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn run_scaled(
        &self,
        desc: &GroupedDesc,
        a: DevicePtr,
        b: DevicePtr,
        offs: DevicePtr,
        c: Option<DevicePtr>,
        d: DevicePtr,
        bias: Option<DevicePtr>,
        scale_a: Option<DevicePtr>,
        scale_b: Option<DevicePtr>,
        stream: *mut c_void,
    ) -> Result<()> {
        grouped_run_scaled_raw(
            self.raw, desc, a, b, offs, c, d, bias, scale_a, scale_b, stream,
        )
    }

    /// Compiles (or hits) and loads the kernel a run of `desc` would use.
    pub fn prepare(&self, desc: &GroupedDesc, with_bias: bool) -> Result<()> {
        check(unsafe { sys::kjit_grouped_gemm_prepare(self.raw, desc, with_bias as c_int) })
    }

    /// The configuration a run with these pointers would use, e.g.
    /// `"grouped-v1 sm_90a tma 128x128x64 s6 pp c1x1 b=nk epi=alpha"`.
    pub fn plan_key(
        &self,
        desc: &GroupedDesc,
        a: DevicePtr,
        b: DevicePtr,
        c: Option<DevicePtr>,
        d: DevicePtr,
        bias: Option<DevicePtr>,
    ) -> Result<String> {
        let mut buf = [0 as c_char; 256];
        check(unsafe {
            sys::kjit_grouped_gemm_plan_key(
                self.raw,
                desc,
                in_ptr(a),
                in_ptr(b),
                opt_ptr(c),
                in_ptr(d),
                opt_ptr(bias),
                buf.as_mut_ptr(),
                buf.len(),
                ptr::null_mut(),
            )
        })?;
        Ok(buf_text(&buf))
    }

    /// Reads and clears the offset record of a handle made with `check_offsets`: `Ok` when
    /// no call since the last read had bad offsets, else `Status::InvalidArgument` naming
    /// the call, the group and the values. Call it once the calls' streams are synchronised.
    pub fn offsets_status(&self) -> Result<()> {
        check(unsafe { sys::kjit_grouped_gemm_offsets_status(self.raw) })
    }
}

impl Drop for GroupedGemm<'_> {
    fn drop(&mut self) {
        unsafe { sys::kjit_grouped_gemm_destroy(self.raw) }
    }
}

impl fmt::Debug for GroupedGemm<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupedGemm")
            .field("raw", &self.raw)
            .finish()
    }
}
