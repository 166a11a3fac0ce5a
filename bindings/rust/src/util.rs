//! C string helpers shared by the modules.

use std::ffi::{CStr, CString};
use std::os::raw::c_char;
use std::path::Path;

use crate::error::{Error, Result, Status};

/// Borrowed C string as &str; null or invalid UTF-8 give "" (the library promises UTF-8).
pub(crate) unsafe fn cstr_or_empty<'a>(p: *const c_char) -> &'a str {
    if p.is_null() {
        ""
    } else {
        CStr::from_ptr(p).to_str().unwrap_or("")
    }
}

pub(crate) unsafe fn cstr_opt<'a>(p: *const c_char) -> Option<&'a str> {
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
pub(crate) fn text_cstring(what: &str, bytes: &[u8], status: Status) -> Result<CString> {
    CString::new(bytes).map_err(|e| {
        Error::local(
            status,
            format!("{what} contains a NUL byte (byte {})", e.nul_position()),
        )
    })
}

/// A string argument other than code (names, options, keys, ...).
pub(crate) fn cstring(what: &str, s: &str) -> Result<CString> {
    text_cstring(what, s.as_bytes(), Status::InvalidArgument)
}

/// Code: a source or the contents of a header.
pub(crate) fn code_cstring(what: &str, s: &str) -> Result<CString> {
    text_cstring(what, s.as_bytes(), Status::InvalidSource)
}

pub(crate) fn path_cstring(what: &str, p: &Path) -> Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    text_cstring(what, p.as_os_str().as_bytes(), Status::InvalidArgument)
}
