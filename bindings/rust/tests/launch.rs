//! Launch paths. Without a CUDA driver or device each GPU test prints "SKIPPED <name>:
//! <reason>" and returns; `kernel_creation_without_a_gpu_says_cuda_unavailable` checks
//! the no-GPU behaviour itself.

mod common;

use common::{gpu_or_skip, Cuda, SAXPY};
use kjit::{args, Compiler, DevicePtr, KernelFlags, LaunchConfig, LoadPath, Options, Status};

const N: usize = 1000;

fn saxpy_inputs() -> (Vec<f32>, Vec<f32>) {
    let x: Vec<f32> = (0..N).map(|i| i as f32).collect();
    let y: Vec<f32> = (0..N).map(|i| 2.0 * i as f32).collect();
    (x, y)
}

fn check_saxpy(a: f32, x: &[f32], y0: &[f32], y: &[f32]) {
    for i in 0..N {
        assert_eq!(y[i], a * x[i] + y0[i], "element {i}");
    }
}

#[test]
fn kernel_creation_without_a_gpu_says_cuda_unavailable() {
    let compiler = Compiler::new(None, 0).unwrap();
    let mut o = Options::new().unwrap();
    o.target("sm_80").unwrap();
    let bin = compiler.compile(SAXPY, Some(&o)).unwrap();
    match kjit::device_count() {
        Err(e) => {
            assert_eq!(e.status(), Status::CudaUnavailable);
            assert!(!e.message().is_empty(), "the message should say why");
            let k = compiler
                .kernel(SAXPY, "saxpy", None, 0, KernelFlags::DEFAULT)
                .unwrap_err();
            assert_eq!(k.status(), Status::CudaUnavailable, "{k}");
            let l = bin.load("saxpy", 0, KernelFlags::DEFAULT).unwrap_err();
            assert_eq!(l.status(), Status::CudaUnavailable, "{l}");
            eprintln!("no CUDA driver here ({e}); GPU launch tests skip");
        }
        Ok(n) => {
            assert!(n > 0);
            assert!(!kjit::device_name(0).unwrap().is_empty());
            assert!(kjit::device_arch(0).unwrap().starts_with("sm_"));
            assert!(kjit::driver_version().unwrap() > 0);
            compiler
                .kernel(SAXPY, "saxpy", None, 0, KernelFlags::DEFAULT)
                .unwrap();
        }
    }
}

#[test]
fn saxpy_with_typed_args() {
    if gpu_or_skip("saxpy_with_typed_args").is_none() {
        return;
    }
    let cuda = Cuda::new();
    let compiler = Compiler::new(None, 0).unwrap();
    let k = compiler
        .kernel(SAXPY, "saxpy", None, 0, KernelFlags::DEFAULT)
        .unwrap();
    assert_eq!(k.symbol(), "saxpy");
    assert_eq!(k.load_path(), LoadPath::Cubin);
    let (x, y0) = saxpy_inputs();
    let (dx, dy) = (cuda.upload(&x), cuda.upload(&y0));
    let (n, a) = (N as i32, 3.0f32);
    unsafe {
        k.launch(
            &LaunchConfig::for_elements(N as u32, 128),
            args![n, a, dx, dy],
        )
        .unwrap()
    };
    cuda.synchronize();
    check_saxpy(a, &x, &y0, &cuda.download(dy, N));
    cuda.free(dx);
    cuda.free(dy);
}

#[test]
fn saxpy_with_packed_buffer() {
    if gpu_or_skip("saxpy_with_packed_buffer").is_none() {
        return;
    }
    let cuda = Cuda::new();
    let compiler = Compiler::new(None, 0).unwrap();
    let k = compiler
        .kernel(SAXPY, "saxpy", None, 0, KernelFlags::DEFAULT)
        .unwrap();
    assert_eq!(k.param_count().unwrap(), 4);
    let layout: Vec<(usize, usize)> = (0..4)
        .map(|i| k.param_info(i).map(|p| (p.offset, p.size)).unwrap())
        .collect();
    assert_eq!(layout, vec![(0, 4), (4, 4), (8, 8), (16, 8)]);
    assert_eq!(k.param_buffer_size().unwrap(), 24);

    let (x, y0) = saxpy_inputs();
    let (dx, dy) = (cuda.upload(&x), cuda.upload(&y0));
    let mut buf = k.param_buffer().unwrap();
    buf.push(&(N as i32))
        .unwrap()
        .push(&0.5f32)
        .unwrap()
        .push(&dx)
        .unwrap()
        .push(&dy)
        .unwrap();
    unsafe {
        k.launch_packed(&LaunchConfig::for_elements(N as u32, 256), buf.as_bytes())
            .unwrap()
    };
    cuda.synchronize();
    check_saxpy(0.5, &x, &y0, &cuda.download(dy, N));

    let short = &buf.as_bytes()[..20];
    let e = unsafe { k.launch_packed(&LaunchConfig::default(), short) }.unwrap_err();
    assert_eq!(e.status(), Status::ArgumentMismatch, "{e}");
    cuda.free(dx);
    cuda.free(dy);
}

#[test]
fn argument_mismatches_are_refused_before_the_driver() {
    if gpu_or_skip("argument_mismatches_are_refused_before_the_driver").is_none() {
        return;
    }
    let _cuda = Cuda::new();
    let compiler = Compiler::new(None, 0).unwrap();
    let k = compiler
        .kernel(SAXPY, "saxpy", None, 0, KernelFlags::DEFAULT)
        .unwrap();
    let cfg = LaunchConfig::default();
    let e = unsafe { k.launch(&cfg, args![1i32, 1.0f32, DevicePtr(0)]) }.unwrap_err();
    assert_eq!(e.status(), Status::ArgumentMismatch);
    assert!(
        e.message().contains('4') && e.message().contains('3'),
        "{}",
        e.message()
    );
    let e = unsafe { k.launch(&cfg, args![1i64, 1.0f32, DevicePtr(0), DevicePtr(0)]) }.unwrap_err();
    assert_eq!(e.status(), Status::ArgumentMismatch, "{e}");
}

#[test]
fn attributes_occupancy_and_binary_loading() {
    if gpu_or_skip("attributes_occupancy_and_binary_loading").is_none() {
        return;
    }
    let cuda = Cuda::new();
    let arch = kjit::device_arch(0).unwrap();
    let mut o = Options::new().unwrap();
    o.target(&arch).unwrap();
    let compiler = Compiler::new(None, 0).unwrap();
    let bin = compiler.compile(SAXPY, Some(&o)).unwrap();
    let mut k = bin.load("saxpy", 0, KernelFlags::DEFAULT).unwrap();
    drop(bin);
    let a = k.attributes().unwrap();
    assert!(a.max_threads_per_block > 0 && a.num_regs > 0, "{a:?}");
    assert!(k.occupancy(256, 0).unwrap() > 0);
    let (grid, block) = k.suggest_block_size(0).unwrap();
    assert!(grid > 0 && block > 0);
    k.set_max_dynamic_shared(1024).unwrap();

    let ptx = bin_ptx_kernel(&compiler, &arch);
    assert_eq!(ptx.load_path(), LoadPath::Ptx);

    // One handle launched from several threads at once.
    let (x, y0) = saxpy_inputs();
    let ys: Vec<DevicePtr> = (0..4).map(|_| cuda.upload(&y0)).collect();
    let dx = cuda.upload(&x);
    std::thread::scope(|s| {
        for &dy in &ys {
            let (k, cuda) = (&k, &cuda);
            s.spawn(move || {
                cuda.make_current();
                unsafe {
                    k.launch(
                        &LaunchConfig::for_elements(N as u32, 128),
                        args![N as i32, 2.0f32, dx, dy],
                    )
                    .unwrap()
                };
            });
        }
    });
    cuda.synchronize();
    for dy in ys {
        check_saxpy(2.0, &x, &y0, &cuda.download(dy, N));
        cuda.free(dy);
    }
    cuda.free(dx);
}

fn bin_ptx_kernel(compiler: &Compiler, arch: &str) -> kjit::Kernel {
    let mut o = Options::new().unwrap();
    o.target(arch).unwrap();
    compiler
        .kernel(SAXPY, "saxpy", Some(&o), 0, KernelFlags::FORCE_PTX)
        .unwrap()
}
