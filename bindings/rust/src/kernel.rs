//! Loaded kernels ([`Kernel`]), their attributes and packed parameter buffers.

use std::fmt;
use std::os::raw::{c_int, c_void};
use std::ptr;

use crate::error::{check, Error, Result, Status};
use crate::launch::{KernelArg, LaunchConfig};
use crate::sys;
use crate::util::cstr_or_empty;

/// `KJIT_KERNEL_*` flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KernelFlags(pub u32);

impl KernelFlags {
    pub const DEFAULT: KernelFlags = KernelFlags(sys::KJIT_KERNEL_DEFAULT);
    /// Fail with `Status::StaleHandle` instead of reloading after a context reset.
    pub const NO_RELOAD: KernelFlags = KernelFlags(sys::KJIT_KERNEL_NO_RELOAD);
    /// Load PTX through the driver JIT even when a CUBIN is available.
    pub const FORCE_PTX: KernelFlags = KernelFlags(sys::KJIT_KERNEL_FORCE_PTX);
}

impl std::ops::BitOr for KernelFlags {
    type Output = KernelFlags;
    fn bitor(self, rhs: KernelFlags) -> KernelFlags {
        KernelFlags(self.0 | rhs.0)
    }
}

/// How a kernel's code was loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadPath {
    Cubin,
    Ptx,
    Other(i32),
}

/// Kernel attributes (`kjit_kernel_attributes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KernelAttributes {
    pub num_regs: i32,
    pub static_shared_bytes: i32,
    pub const_bytes: i32,
    pub local_bytes: i32,
    pub max_threads_per_block: i32,
    pub max_dynamic_shared_bytes: i32,
    pub ptx_version: i32,
    pub binary_version: i32,
}

/// One parameter's place in the packed parameter buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamInfo {
    pub offset: usize,
    pub size: usize,
}

/// A loaded, launchable kernel (`kjit_kernel`), destroyed on drop.
pub struct Kernel {
    pub(crate) raw: *mut sys::kjit_kernel,
}

// The C API: "handles may be shared between threads"; "any number of threads may launch
// the same handle at once". Destroy (Drop) has exclusive access; set_max_dynamic_shared,
// which changes the function's attribute, takes &mut self.
unsafe impl Send for Kernel {}
unsafe impl Sync for Kernel {}

const STACK_ARGS: usize = 32;

impl Kernel {
    pub fn as_raw(&self) -> *mut sys::kjit_kernel {
        self.raw
    }

    pub fn load_path(&self) -> LoadPath {
        match unsafe { sys::kjit_kernel_load_path(self.raw) } {
            0 => LoadPath::Cubin,
            1 => LoadPath::Ptx,
            n => LoadPath::Other(n),
        }
    }

    /// Mangled symbol of the loaded function.
    pub fn symbol(&self) -> &str {
        unsafe { cstr_or_empty(sys::kjit_kernel_symbol(self.raw)) }
    }

    pub fn param_count(&self) -> Result<usize> {
        let mut n = 0usize;
        check(unsafe { sys::kjit_kernel_param_count(self.raw, &mut n) })?;
        Ok(n)
    }

    pub fn param_info(&self, index: usize) -> Result<ParamInfo> {
        let (mut offset, mut size) = (0usize, 0usize);
        check(unsafe { sys::kjit_kernel_param_info(self.raw, index, &mut offset, &mut size) })?;
        Ok(ParamInfo { offset, size })
    }

    /// Total bytes of the packed parameter buffer.
    pub fn param_buffer_size(&self) -> Result<usize> {
        let mut n = 0usize;
        check(unsafe { sys::kjit_kernel_param_buffer_size(self.raw, &mut n) })?;
        Ok(n)
    }

    pub fn attributes(&self) -> Result<KernelAttributes> {
        let mut a = sys::kjit_kernel_attributes {
            struct_size: std::mem::size_of::<sys::kjit_kernel_attributes>() as u32,
            ..Default::default()
        };
        check(unsafe { sys::kjit_kernel_get_attributes(self.raw, &mut a) })?;
        Ok(KernelAttributes {
            num_regs: a.num_regs,
            static_shared_bytes: a.static_shared_bytes,
            const_bytes: a.const_bytes,
            local_bytes: a.local_bytes,
            max_threads_per_block: a.max_threads_per_block,
            max_dynamic_shared_bytes: a.max_dynamic_shared_bytes,
            ptx_version: a.ptx_version,
            binary_version: a.binary_version,
        })
    }

    /// Raises the kernel's maximum dynamic shared memory.
    pub fn set_max_dynamic_shared(&mut self, bytes: i32) -> Result<()> {
        check(unsafe { sys::kjit_kernel_set_max_dynamic_shared(self.raw, bytes) })
    }

    /// Maximum active blocks per SM.
    pub fn occupancy(&self, block_size: i32, dynamic_shared: usize) -> Result<i32> {
        let mut n: c_int = 0;
        check(unsafe { sys::kjit_kernel_occupancy(self.raw, block_size, dynamic_shared, &mut n) })?;
        Ok(n)
    }

    /// (minimum grid to fill the device, block size that maximises occupancy).
    pub fn suggest_block_size(&self, dynamic_shared: usize) -> Result<(i32, i32)> {
        let (mut grid, mut block): (c_int, c_int) = (0, 0);
        check(unsafe {
            sys::kjit_kernel_suggest_block_size(self.raw, dynamic_shared, &mut grid, &mut block)
        })?;
        Ok((grid, block))
    }

    /// A zeroed packed parameter buffer laid out for this kernel.
    pub fn param_buffer(&self) -> Result<ParamBuffer> {
        let n = self.param_count()?;
        let params = (0..n)
            .map(|i| self.param_info(i))
            .collect::<Result<Vec<_>>>()?;
        let size = self.param_buffer_size()?;
        Ok(ParamBuffer {
            params,
            bytes: vec![0u8; size],
            next: 0,
        })
    }

    /// Launches with one argument per kernel parameter; the library checks the count and
    /// each size (`Status::ArgumentMismatch`). Asynchronous on `cfg.stream`.
    ///
    /// # Safety
    /// The kernel runs arbitrary device code: device pointers among `args` must be valid
    /// for what the kernel does with them, and the memory must stay alive until the
    /// launch completes on the stream.
    pub unsafe fn launch(&self, cfg: &LaunchConfig, args: &[&dyn KernelArg]) -> Result<()> {
        let c = cfg.to_c();
        let n = args.len();
        if n <= STACK_ARGS {
            let mut ptrs = [ptr::null_mut::<c_void>(); STACK_ARGS];
            let mut sizes = [0usize; STACK_ARGS];
            for (i, a) in args.iter().enumerate() {
                ptrs[i] = a.arg_ptr() as *mut c_void;
                sizes[i] = a.arg_size();
            }
            check(sys::kjit_kernel_launch_sized(
                self.raw,
                &c,
                ptrs.as_mut_ptr(),
                sizes.as_ptr(),
                n,
            ))
        } else {
            let mut ptrs: Vec<*mut c_void> =
                args.iter().map(|a| a.arg_ptr() as *mut c_void).collect();
            let sizes: Vec<usize> = args.iter().map(|a| a.arg_size()).collect();
            check(sys::kjit_kernel_launch_sized(
                self.raw,
                &c,
                ptrs.as_mut_ptr(),
                sizes.as_ptr(),
                n,
            ))
        }
    }

    /// `cuLaunchKernel`-style launch: `args[i]` points at the value of parameter `i`; the
    /// library checks only the count.
    ///
    /// # Safety
    /// As [`launch`](Kernel::launch), and every pointer must point at a value of the
    /// parameter's exact size.
    pub unsafe fn launch_raw(&self, cfg: &LaunchConfig, args: &mut [*mut c_void]) -> Result<()> {
        let c = cfg.to_c();
        check(sys::kjit_kernel_launch(
            self.raw,
            &c,
            args.as_mut_ptr(),
            args.len(),
        ))
    }

    /// Launches with one packed parameter buffer (see [`param_buffer`](Kernel::param_buffer));
    /// its size must equal [`param_buffer_size`](Kernel::param_buffer_size).
    ///
    /// # Safety
    /// As [`launch`](Kernel::launch).
    pub unsafe fn launch_packed(&self, cfg: &LaunchConfig, buffer: &[u8]) -> Result<()> {
        let c = cfg.to_c();
        check(sys::kjit_kernel_launch_packed(
            self.raw,
            &c,
            buffer.as_ptr() as *const c_void,
            buffer.len(),
        ))
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        unsafe { sys::kjit_kernel_destroy(self.raw) }
    }
}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kernel")
            .field("symbol", &self.symbol())
            .finish()
    }
}

/// A packed parameter buffer laid out by a kernel's parameter offsets, for
/// [`Kernel::launch_packed`]. Values are written with [`push`](ParamBuffer::push) (in
/// parameter order) or [`set`](ParamBuffer::set); each value's size must equal its
/// parameter's size.
#[derive(Debug, Clone)]
pub struct ParamBuffer {
    params: Vec<ParamInfo>,
    bytes: Vec<u8>,
    next: usize,
}

impl ParamBuffer {
    /// Writes parameter `index`.
    pub fn set<T: KernelArg + ?Sized>(&mut self, index: usize, value: &T) -> Result<&mut Self> {
        let p = *self.params.get(index).ok_or_else(|| {
            Error::local(
                Status::ArgumentMismatch,
                format!(
                    "parameter {index} does not exist: the kernel has {}",
                    self.params.len()
                ),
            )
        })?;
        let size = value.arg_size();
        if size != p.size {
            return Err(Error::local(
                Status::ArgumentMismatch,
                format!(
                    "parameter {index}: the kernel expects {} bytes, the value has {size}",
                    p.size
                ),
            ));
        }
        let src = unsafe { std::slice::from_raw_parts(value.arg_ptr() as *const u8, size) };
        self.bytes[p.offset..p.offset + size].copy_from_slice(src);
        Ok(self)
    }

    /// Writes the next parameter (0, 1, 2, ... in call order).
    pub fn push<T: KernelArg + ?Sized>(&mut self, value: &T) -> Result<&mut Self> {
        let i = self.next;
        self.set(i, value)?;
        self.next = i + 1;
        Ok(self)
    }

    /// Parameter layout of the kernel.
    pub fn params(&self) -> &[ParamInfo] {
        &self.params
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::DevicePtr;

    #[test]
    fn param_buffer_checks_sizes_and_writes_offsets() {
        let mut b = ParamBuffer {
            params: vec![
                ParamInfo { offset: 0, size: 4 },
                ParamInfo { offset: 8, size: 8 },
            ],
            bytes: vec![0; 16],
            next: 0,
        };
        b.push(&7i32)
            .unwrap()
            .push(&DevicePtr(0x1122334455667788))
            .unwrap();
        assert_eq!(&b.as_bytes()[0..4], &7i32.to_ne_bytes());
        assert_eq!(&b.as_bytes()[8..16], &0x1122334455667788u64.to_ne_bytes());
        let e = b.set(0, &1i64).unwrap_err();
        assert_eq!(e.status(), Status::ArgumentMismatch);
        assert_eq!(
            b.set(2, &1i32).unwrap_err().status(),
            Status::ArgumentMismatch
        );
    }
}
