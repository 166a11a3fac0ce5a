//! Content hashes and cache keys, computed without compiling.

use std::os::raw::c_char;

use crate::error::{check, Result};
use crate::options::{opts_ptr, Options};
use crate::sys;
use crate::util::{code_cstring, cstr_or_empty, cstring};

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
