//! Reading C strings the library returns. Depends on nothing else of the crate, so that
//! both `error` (the last error message) and `util` (which builds errors) can use it.

use std::ffi::CStr;
use std::os::raw::c_char;

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
