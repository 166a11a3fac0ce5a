//! Helpers shared by the tests and examples: temporary directories, the saxpy source,
//! and a minimal CUDA driver binding (dlopen'ed, so nothing links libcuda).
#![allow(dead_code, clippy::manual_c_str_literals)]

use std::ffi::CString;
use std::os::raw::{c_char, c_int, c_uint, c_void};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

pub const SAXPY: &str = r#"extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"#;

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "kjit-rust-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Device count, or None (with the reason printed) when launches cannot run here.
pub fn gpu_or_skip(test: &str) -> Option<i32> {
    match kjit::device_count() {
        Ok(n) if n > 0 => Some(n),
        Ok(_) => {
            eprintln!("SKIPPED {test}: no CUDA device");
            None
        }
        Err(e) => {
            assert_eq!(
                e.status(),
                kjit::Status::CudaUnavailable,
                "unexpected error: {e}"
            );
            eprintln!("SKIPPED {test}: {e}");
            None
        }
    }
}

extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}
const RTLD_NOW: c_int = 2;

type CuResult = c_int;

/// Just enough of the CUDA driver API to allocate, copy and synchronise in the primary
/// context of one device (kjit uses the same one): `Cuda::new()` is device 0. Every call
/// makes that context current on the calling thread first.
pub struct Cuda {
    mem_alloc: unsafe extern "C" fn(*mut u64, usize) -> CuResult,
    mem_free: unsafe extern "C" fn(u64) -> CuResult,
    htod: unsafe extern "C" fn(u64, *const c_void, usize) -> CuResult,
    dtoh: unsafe extern "C" fn(*mut c_void, u64, usize) -> CuResult,
    sync: unsafe extern "C" fn() -> CuResult,
    set_current: unsafe extern "C" fn(*mut c_void) -> CuResult,
    ctx: *mut c_void,
}

unsafe impl Send for Cuda {}
unsafe impl Sync for Cuda {}

unsafe fn sym<T>(lib: *mut c_void, name: &str) -> T {
    let c = CString::new(name).unwrap();
    let p = dlsym(lib, c.as_ptr());
    assert!(!p.is_null(), "libcuda.so.1 has no {name}");
    std::mem::transmute_copy(&p)
}

fn ck(r: CuResult, what: &str) {
    assert_eq!(r, 0, "{what} failed with CUresult {r}");
}

impl Cuda {
    pub fn new() -> Cuda {
        Cuda::on_device(0)
    }

    /// The primary context of device `device`, made current on the calling thread.
    pub fn on_device(device: i32) -> Cuda {
        unsafe {
            let lib = dlopen(b"libcuda.so.1\0".as_ptr() as *const c_char, RTLD_NOW);
            assert!(!lib.is_null(), "dlopen(libcuda.so.1) failed");
            let init: unsafe extern "C" fn(c_uint) -> CuResult = sym(lib, "cuInit");
            let device_get: unsafe extern "C" fn(*mut c_int, c_int) -> CuResult =
                sym(lib, "cuDeviceGet");
            let retain: unsafe extern "C" fn(*mut *mut c_void, c_int) -> CuResult =
                sym(lib, "cuDevicePrimaryCtxRetain");
            let cuda = Cuda {
                mem_alloc: sym(lib, "cuMemAlloc_v2"),
                mem_free: sym(lib, "cuMemFree_v2"),
                htod: sym(lib, "cuMemcpyHtoD_v2"),
                dtoh: sym(lib, "cuMemcpyDtoH_v2"),
                sync: sym(lib, "cuCtxSynchronize"),
                set_current: sym(lib, "cuCtxSetCurrent"),
                ctx: std::ptr::null_mut(),
            };
            ck(init(0), "cuInit");
            let mut dev = 0;
            ck(device_get(&mut dev, device), "cuDeviceGet");
            let mut ctx = std::ptr::null_mut();
            ck(retain(&mut ctx, dev), "cuDevicePrimaryCtxRetain");
            let cuda = Cuda { ctx, ..cuda };
            cuda.make_current();
            cuda
        }
    }

    /// Makes the primary context current on the calling thread.
    pub fn make_current(&self) {
        ck(unsafe { (self.set_current)(self.ctx) }, "cuCtxSetCurrent");
    }

    pub fn upload(&self, data: &[f32]) -> kjit::DevicePtr {
        self.make_current();
        let bytes = std::mem::size_of_val(data);
        let mut d = 0u64;
        unsafe {
            ck((self.mem_alloc)(&mut d, bytes), "cuMemAlloc");
            ck(
                (self.htod)(d, data.as_ptr() as *const c_void, bytes),
                "cuMemcpyHtoD",
            );
        }
        kjit::DevicePtr(d)
    }

    pub fn download(&self, d: kjit::DevicePtr, n: usize) -> Vec<f32> {
        self.make_current();
        let mut v = vec![0f32; n];
        unsafe {
            ck(
                (self.dtoh)(v.as_mut_ptr() as *mut c_void, d.0, n * 4),
                "cuMemcpyDtoH",
            )
        };
        v
    }

    pub fn free(&self, d: kjit::DevicePtr) {
        self.make_current();
        unsafe { ck((self.mem_free)(d.0), "cuMemFree") };
    }

    pub fn synchronize(&self) {
        self.make_current();
        unsafe { ck((self.sync)(), "cuCtxSynchronize") };
    }
}
