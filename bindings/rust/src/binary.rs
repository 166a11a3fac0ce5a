//! Compiled results ([`Binary`]) and where they came from ([`Tier`]).

use std::ffi::CString;
use std::fmt;
use std::os::raw::c_int;
use std::ptr;

use crate::error::{check, Result};
use crate::kernel::{Kernel, KernelFlags};
use crate::options::Outputs;
use crate::sys;
use crate::util::{cstr_opt, cstr_or_empty, cstring};

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
    pub(crate) raw: *mut sys::kjit_binary,
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
