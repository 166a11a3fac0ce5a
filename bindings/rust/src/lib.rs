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

//!
//! One module per type, re-exported here: [`cache`](Cache), [`compiler`](Compiler),
//! [`options`](Options), [`binary`](Binary), [`kernel`](Kernel), [`launch`](LaunchConfig),
//! [`gemm`](Gemm), [`error`](Error).

use std::os::raw::c_char;
use std::ptr;

pub use kjit_sys as sys;

mod binary;
mod cache;
mod compiler;
mod cstr;
mod device;
mod devptr;
mod error;
mod gemm;
mod grouped;
mod hash;
mod kernel;
mod launch;
mod link;
mod log;
mod options;
mod util;

pub use binary::{Binary, Tier};
pub use cache::{Cache, CacheEntry, CacheOptions, CacheStats, DiskState};
pub use compiler::{Compiler, OwnedCompiler, PendingCompile};
pub use device::{device_arch, device_count, device_name, driver_version};
pub use error::{Error, Result, Status};
pub use gemm::{cublaslt_version, gemm_check, gemm_desc, Gemm, GemmDesc, GemmOptions, GemmStats};
pub use grouped::{
    grouped_check, grouped_check_scaled, grouped_compile, grouped_desc, GroupedDesc, GroupedGemm,
    GroupedOptions,
};
pub use hash::{compute_key, hash_options, hash_source};
pub use kernel::{Kernel, KernelAttributes, KernelFlags, LoadPath, ParamBuffer, ParamInfo};
pub use launch::{DevicePtr, KernelArg, LaunchConfig};
pub use link::{nvjitlink_version, LinkInput, Linker};
pub use log::{set_log_callback, LogFn, LogLevel};
pub use options::{Options, Outputs};

// The helpers every module uses, also reachable as `crate::check`, `crate::cstring`, ...
#[allow(unused_imports)]
pub(crate) use error::check;
#[allow(unused_imports)]
pub(crate) use util::{code_cstring, cstr_opt, cstr_or_empty, cstring, path_cstring};

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
        assert_send_static::<OwnedCompiler>();
        assert_send_static::<Gemm<'static>>();
    }

    fn assert_send_static<T: Send + 'static>() {}

    #[test]
    fn status_codes_round_trip() {
        for code in (0..=24).chain([99, 1234]) {
            assert_eq!(Status::from_raw(code).raw(), code);
        }
        assert_eq!(Status::from_raw(5), Status::Compile);
        assert_eq!(Status::from_raw(1234), Status::Other(1234));
    }
}
