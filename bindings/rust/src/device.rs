//! CUDA devices and the driver.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int};

use crate::error::{check, Result};
use crate::sys;

/// Number of CUDA devices; `Err(Status::CudaUnavailable)` without a driver.
pub fn device_count() -> Result<i32> {
    let mut n: c_int = 0;
    check(unsafe { sys::kjit_device_count(&mut n) })?;
    Ok(n)
}

type DeviceStringFn = unsafe extern "C" fn(c_int, *mut c_char, usize) -> c_int;

fn device_string(f: DeviceStringFn, device: i32) -> Result<String> {
    let mut buf = [0 as c_char; 256];
    check(unsafe { f(device, buf.as_mut_ptr(), buf.len()) })?;
    Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned())
}

/// Exact architecture of a device as an NVRTC target, e.g. "sm_90".
pub fn device_arch(device: i32) -> Result<String> {
    device_string(sys::kjit_device_arch, device)
}

/// Device name, e.g. "NVIDIA H200".
pub fn device_name(device: i32) -> Result<String> {
    device_string(sys::kjit_device_name, device)
}

/// CUDA driver version, e.g. 13000.
pub fn driver_version() -> Result<i32> {
    let mut v: c_int = 0;
    check(unsafe { sys::kjit_driver_version(&mut v) })?;
    Ok(v)
}
