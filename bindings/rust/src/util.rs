//! C string helpers shared by the modules: text to C (checked for NUL bytes) here, C to
//! text in `cstr` (re-exported).

use std::ffi::CString;
use std::path::Path;

pub(crate) use crate::cstr::{cstr_opt, cstr_or_empty};
use crate::error::{Error, Result, Status};

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
