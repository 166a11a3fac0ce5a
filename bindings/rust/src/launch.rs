//! Launch configurations and kernel arguments.

use std::os::raw::{c_int, c_void};
use std::ptr;

use crate::sys;

/// Launch configuration. `Default`: one block of one thread on the legacy default stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
    /// A `CUstream` / `cudaStream_t`; null = the legacy default stream.
    pub stream: *mut c_void,
    /// Thread-block cluster dims (sm_90+); [0, 0, 0] = none.
    pub cluster: [u32; 3],
    pub cooperative: bool,
}

// The stream is an opaque driver handle that Rust never dereferences.
unsafe impl Send for LaunchConfig {}
unsafe impl Sync for LaunchConfig {}

impl Default for LaunchConfig {
    fn default() -> Self {
        LaunchConfig {
            grid: [1, 1, 1],
            block: [1, 1, 1],
            shared_bytes: 0,
            stream: ptr::null_mut(),
            cluster: [0, 0, 0],
            cooperative: false,
        }
    }
}

impl LaunchConfig {
    /// A 1-D launch: `grid` blocks of `block` threads.
    pub fn linear(grid: u32, block: u32) -> LaunchConfig {
        LaunchConfig {
            grid: [grid, 1, 1],
            block: [block, 1, 1],
            ..Default::default()
        }
    }

    /// Enough blocks of `block` threads to cover `n` elements.
    pub fn for_elements(n: u32, block: u32) -> LaunchConfig {
        let b = block.max(1);
        Self::linear((n / b + u32::from(n % b != 0)).max(1), block)
    }

    pub fn with_stream(mut self, stream: *mut c_void) -> LaunchConfig {
        self.stream = stream;
        self
    }

    pub fn with_shared_bytes(mut self, bytes: u32) -> LaunchConfig {
        self.shared_bytes = bytes;
        self
    }

    pub(crate) fn to_c(self) -> sys::kjit_launch_config {
        sys::kjit_launch_config {
            struct_size: std::mem::size_of::<sys::kjit_launch_config>() as u32,
            grid: self.grid,
            block: self.block,
            shared_bytes: self.shared_bytes,
            stream: self.stream,
            cluster: self.cluster,
            cooperative: self.cooperative as c_int,
        }
    }
}

/// A value that can be passed as a kernel parameter: its bytes are handed to the driver
/// as they are, and the library checks their size against the kernel's parameter.
///
/// # Safety
/// `arg_ptr` must point at `arg_size` readable bytes that stay valid while `self` is
/// borrowed, holding the value exactly as the kernel's parameter type lays it out.
pub unsafe trait KernelArg {
    fn arg_ptr(&self) -> *const c_void;
    fn arg_size(&self) -> usize;
}

macro_rules! kernel_arg_by_value {
    ($($t:ty),*) => {$(
        unsafe impl KernelArg for $t {
            #[inline]
            fn arg_ptr(&self) -> *const c_void { self as *const $t as *const c_void }
            #[inline]
            fn arg_size(&self) -> usize { std::mem::size_of::<$t>() }
        }
    )*};
}
kernel_arg_by_value!(i8, i16, i32, i64, u8, u16, u32, u64, isize, usize, f32, f64, bool);

/// A device address (`CUdeviceptr`), e.g. from `cuMemAlloc` or another CUDA library.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DevicePtr(pub u64);
kernel_arg_by_value!(DevicePtr);

unsafe impl<T> KernelArg for *const T {
    #[inline]
    fn arg_ptr(&self) -> *const c_void {
        self as *const *const T as *const c_void
    }
    #[inline]
    fn arg_size(&self) -> usize {
        std::mem::size_of::<*const T>()
    }
}

unsafe impl<T> KernelArg for *mut T {
    #[inline]
    fn arg_ptr(&self) -> *const c_void {
        self as *const *mut T as *const c_void
    }
    #[inline]
    fn arg_size(&self) -> usize {
        std::mem::size_of::<*mut T>()
    }
}

/// Arrays of kernel args by value, e.g. a `float4` passed as `[f32; 4]`.
unsafe impl<T: KernelArg + Copy, const N: usize> KernelArg for [T; N] {
    #[inline]
    fn arg_ptr(&self) -> *const c_void {
        self.as_ptr() as *const c_void
    }
    #[inline]
    fn arg_size(&self) -> usize {
        std::mem::size_of::<[T; N]>()
    }
}

/// Builds the argument list of [`Kernel::launch`]: `kjit::args![n, a, x, y]`.
#[macro_export]
macro_rules! args {
    ($($a:expr),* $(,)?) => { &[$(&$a as &dyn $crate::KernelArg),*] };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_config_for_elements_rounds_up() {
        let c = LaunchConfig::for_elements(1000, 256);
        assert_eq!(c.grid, [4, 1, 1]);
        assert_eq!(c.block, [256, 1, 1]);
        assert_eq!(LaunchConfig::for_elements(0, 256).grid, [1, 1, 1]);
    }
}
