//! Compile options ([`Options`], [`Outputs`]).

use std::fmt;
use std::os::raw::c_int;
use std::path::Path;
use std::ptr;

use crate::error::{check, Result};
use crate::sys;
use crate::util::{code_cstring, cstring, path_cstring};

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
    pub(crate) raw: *mut sys::kjit_options,
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

    /// One raw NVRTC option, e.g. "-std=c++17". "--no-builtin-std" is kjit's own: it turns
    /// off the built-in standard headers (`<cstdint>`, `<cmath>` ...).
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

pub(crate) fn opts_ptr(opts: Option<&Options>) -> *const sys::kjit_options {
    opts.map_or(ptr::null(), |o| o.raw as *const _)
}
