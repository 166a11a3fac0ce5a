//! Two devices in one process: one compile, a kernel handle per device, launches on both.
//! Prints "SKIPPED <name>: <reason>" and returns without two CUDA devices.

mod common;

use common::{gpu_or_skip, Cuda, TempDir, SAXPY};
use kjit::{args, Cache, CacheOptions, Compiler, KernelFlags, LaunchConfig};

const N: usize = 4096;

#[test]
fn two_devices_compile_once_and_launch_on_both() {
    let name = "two_devices_compile_once_and_launch_on_both";
    match gpu_or_skip(name) {
        None => return,
        Some(n) if n < 2 => {
            eprintln!("SKIPPED {name}: needs two CUDA devices; this machine has {n}");
            return;
        }
        Some(_) => {}
    }
    let dir = TempDir::new("multi-gpu");
    let cache = Cache::open(&CacheOptions::in_dir(dir.path())).unwrap();
    let compiler = Compiler::new(Some(&cache), 0).unwrap();
    let same_arch = kjit::device_arch(0).unwrap() == kjit::device_arch(1).unwrap();

    let k0 = compiler
        .kernel(SAXPY, "saxpy", None, 0, KernelFlags::DEFAULT)
        .unwrap();
    let k1 = compiler
        .kernel(SAXPY, "saxpy", None, 1, KernelFlags::DEFAULT)
        .unwrap();
    let stats = cache.stats().unwrap();
    if same_arch {
        assert_eq!(stats.compiles, 1, "device 1 reuses device 0's compile: {stats:?}");
        assert_eq!(stats.memory_hits, 1, "{stats:?}");
    } else {
        assert_eq!(stats.compiles, 2, "two architectures, two compiles: {stats:?}");
    }

    // Buffers in each device's primary context; the launches run from one thread whose
    // current context is device 0's (Cuda::on_device(1) made device 1's current last, so
    // switch back): kjit launches each kernel in its own device's context.
    let cuda = [Cuda::on_device(0), Cuda::on_device(1)];
    let x: Vec<f32> = (0..N).map(|i| i as f32).collect();
    let y0: Vec<f32> = (0..N).map(|i| 0.5 * i as f32).collect();
    let bufs: Vec<_> = cuda.iter().map(|c| (c.upload(&x), c.upload(&y0))).collect();
    cuda[0].make_current();
    for (dev, k) in [&k0, &k1].into_iter().enumerate() {
        let a = 2.0f32 + dev as f32;
        let (dx, dy) = bufs[dev];
        unsafe {
            k.launch(
                &LaunchConfig::for_elements(N as u32, 256),
                args![N as i32, a, dx, dy],
            )
            .unwrap()
        };
    }
    for (dev, c) in cuda.iter().enumerate() {
        c.synchronize();
        let a = 2.0f32 + dev as f32;
        let (dx, dy) = bufs[dev];
        let y = c.download(dy, N);
        for i in 0..N {
            assert_eq!(y[i], a * x[i] + y0[i], "device {dev}, element {i}");
        }
        c.free(dx);
        c.free(dy);
    }
}
