//! Device pointers and versioned structs as the GEMM modules hand them to the C API.

use std::os::raw::{c_char, c_void};
use std::ptr;

use crate::launch::DevicePtr;

/// A device pointer as `const void*`; `None` is NULL.
pub(crate) fn opt_ptr(p: Option<DevicePtr>) -> *const c_void {
    p.map_or(ptr::null(), |p| p.0 as usize as *const c_void)
}

/// A device pointer as `const void*`.
pub(crate) fn in_ptr(p: DevicePtr) -> *const c_void {
    opt_ptr(Some(p))
}

/// A device pointer as `void*` (an output).
pub(crate) fn out_ptr(p: DevicePtr) -> *mut c_void {
    p.0 as usize as *mut c_void
}

/// The `struct_size` of a versioned struct of this binding's layout.
pub(crate) fn struct_size<T>() -> u32 {
    std::mem::size_of::<T>() as u32
}

/// Text the C API wrote into `buf` (NUL-terminated or filling it).
pub(crate) fn buf_text(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}
