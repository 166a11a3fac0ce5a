//! The link step through nvJitLink (`include/kjit/link.h`): kjit binaries and device code
//! from elsewhere (LTO-IR, PTX, CUBIN, fatbinaries, objects, static libraries) linked into
//! a CUBIN, cached like a compile.
//!
//! ```no_run
//! # fn main() -> kjit::Result<()> {
//! # let cache = kjit::Cache::open(&kjit::CacheOptions::default())?;
//! # let compiler = kjit::Compiler::new(Some(&cache), 0)?;
//! let mut o = kjit::Options::new()?;
//! o.target("sm_90")?.outputs(kjit::Outputs::LTOIR)?.add("-rdc=true")?;
//! let caller = compiler.compile("extern __device__ float f(float); /* ... */", Some(&o))?;
//! let callee = compiler.compile("__device__ float f(float x) { return 2 * x; }", Some(&o))?;
//! let mut linker = kjit::Linker::new(Some(&cache))?;
//! linker.add_binary(&caller, None)?.add_binary(&callee, None)?.option("-lto")?;
//! let linked = linker.link()?; // a cache hit the second time
//! # Ok(()) }
//! ```

use std::ffi::CStr;
use std::marker::PhantomData;
use std::os::raw::{c_char, c_int, c_void};
use std::path::Path;
use std::ptr;

use crate::{check, cstring, path_cstring, sys, Binary, Cache, Error, Outputs, Result};

/// Kinds of link input (`kjit_link_input`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkInput {
    /// Files only: from the extension (.cubin .ptx .ltoir .fatbin .o .a).
    Auto = 0,
    /// Relocatable CUBIN (compiled with -rdc=true).
    Cubin = 1,
    /// PTX text (compiled with -rdc=true).
    Ptx = 2,
    /// LTO-IR ([`Outputs::LTOIR`]); link with "-lto".
    Ltoir = 3,
    /// Fatbinary.
    Fatbin = 4,
    /// Host object file with device code.
    Object = 5,
    /// Static library of such objects.
    Library = 6,
}

/// A link (`kjit_linker`): inputs, options and target, linked by [`Linker::link`] or
/// answered by the cache. `link` and `key` may run on several threads at once; the
/// builder methods take `&mut self`. The borrow keeps the cache alive.
pub struct Linker<'c> {
    raw: *mut sys::kjit_linker,
    _cache: PhantomData<&'c Cache>,
}

// The C API: concurrent kjit_link() calls on one linker are safe; changes need &mut.
unsafe impl Send for Linker<'_> {}
unsafe impl Sync for Linker<'_> {}

fn opt_cstring(what: &str, s: Option<&str>) -> Result<Option<std::ffi::CString>> {
    s.map(|s| cstring(what, s)).transpose()
}

impl<'c> Linker<'c> {
    /// With a cache, every link goes through it.
    pub fn new(cache: Option<&'c Cache>) -> Result<Linker<'c>> {
        let mut raw = ptr::null_mut();
        let c = cache.map_or(ptr::null_mut(), |c| c.raw);
        check(unsafe { sys::kjit_linker_create(c, &mut raw) })?;
        Ok(Linker {
            raw,
            _cache: PhantomData,
        })
    }

    /// "sm_90", "sm_90a", ... or "auto" (device 0). Default: the first binary's target.
    pub fn target(&mut self, target: &str) -> Result<&mut Self> {
        let t = cstring("target", target)?;
        check(unsafe { sys::kjit_linker_set_target(self.raw, t.as_ptr()) })?;
        Ok(self)
    }

    /// One nvJitLink option: "-lto", "-O3", "-maxrregcount=64", "-ftz=1", ...
    pub fn option(&mut self, option: &str) -> Result<&mut Self> {
        let o = cstring("option", option)?;
        check(unsafe { sys::kjit_linker_add_option(self.raw, o.as_ptr()) })?;
        Ok(self)
    }

    /// [`Outputs::CUBIN`] (the default) and/or [`Outputs::PTX`] (needs "-lto").
    pub fn outputs(&mut self, outputs: Outputs) -> Result<&mut Self> {
        check(unsafe { sys::kjit_linker_set_outputs(self.raw, outputs.0) })?;
        Ok(self)
    }

    /// A compile or link result: its LTO-IR, else its CUBIN for the link's architecture,
    /// else its PTX. `name` labels it in nvJitLink's log.
    pub fn add_binary(&mut self, binary: &Binary, name: Option<&str>) -> Result<&mut Self> {
        let n = opt_cstring("name", name)?;
        check(unsafe {
            sys::kjit_linker_add_binary(
                self.raw,
                binary.raw,
                n.as_ref().map_or(ptr::null(), |c| c.as_ptr()),
            )
        })?;
        Ok(self)
    }

    /// Bytes of one kind (not [`LinkInput::Auto`]); they are copied.
    pub fn add_data(
        &mut self,
        kind: LinkInput,
        data: &[u8],
        name: Option<&str>,
    ) -> Result<&mut Self> {
        let n = opt_cstring("name", name)?;
        check(unsafe {
            sys::kjit_linker_add_data(
                self.raw,
                kind as c_int,
                data.as_ptr() as *const c_void,
                data.len(),
                n.as_ref().map_or(ptr::null(), |c| c.as_ptr()),
            )
        })?;
        Ok(self)
    }

    /// The file at `path`, read now; [`LinkInput::Auto`] takes the kind from its extension.
    pub fn add_file(&mut self, kind: LinkInput, path: &Path) -> Result<&mut Self> {
        let p = path_cstring("path", path)?;
        check(unsafe { sys::kjit_linker_add_file(self.raw, kind as c_int, p.as_ptr()) })?;
        Ok(self)
    }

    /// The cache key [`Linker::link`] would use (64 hex digits), without linking.
    pub fn key(&self) -> Result<String> {
        let mut buf = [0 as c_char; 65];
        check(unsafe { sys::kjit_linker_key(self.raw, buf.as_mut_ptr()) })?;
        Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned())
    }

    /// Links (or hits the cache). A failure nvJitLink reports ([`Status::Link`](crate::Status::Link) for
    /// undefined or duplicate symbols and unreadable inputs, [`Status::UnsupportedTarget`](crate::Status::UnsupportedTarget),
    /// [`Status::InvalidOption`](crate::Status::InvalidOption)) carries nvJitLink's log in [`Error::log`].
    pub fn link(&self) -> Result<Binary> {
        let mut out = ptr::null_mut();
        let code = unsafe { sys::kjit_link(self.raw, &mut out) };
        if code == sys::KJIT_OK {
            return Ok(Binary { raw: out });
        }
        let mut err = Error::last(code);
        if !out.is_null() {
            let b = Binary { raw: out };
            err.log = b.log().to_string();
            if !err.log.is_empty() {
                if let Some(i) = err.message.find('\n') {
                    err.message.truncate(i); // the log follows in log()
                }
            }
        }
        Err(err)
    }

    pub fn as_raw(&self) -> *mut c_void {
        self.raw as *mut c_void
    }
}

impl Drop for Linker<'_> {
    fn drop(&mut self) {
        unsafe { sys::kjit_linker_destroy(self.raw) }
    }
}

impl std::fmt::Debug for Linker<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Linker").field("raw", &self.raw).finish()
    }
}

/// The nvJitLink in use, e.g. "nvJitLink 13.0 build-id:157d67e6..." (loads it).
pub fn nvjitlink_version() -> Result<&'static str> {
    let mut p = ptr::null();
    check(unsafe { sys::kjit_nvjitlink_version(&mut p) })?;
    Ok(unsafe { CStr::from_ptr(p) }.to_str().unwrap_or(""))
}
