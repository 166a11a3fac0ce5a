//! Launch enqueue cost through the Rust bindings (needs a GPU):
//!
//!     cargo run --release --example launch_overhead [launches]
//!
//! Prints microseconds per launch for an empty kernel and for saxpy with 4 arguments,
//! through `launch` (typed args, checked sizes), `launch_packed` and `launch_raw`.

#[path = "../tests/common/mod.rs"]
mod common;

use kjit::{args, Compiler, KernelFlags, LaunchConfig};
use std::os::raw::c_void;
use std::time::Instant;

fn per_launch(label: &str, iters: usize, mut f: impl FnMut()) {
    for _ in 0..iters / 10 {
        f();
    }
    let t = Instant::now();
    for _ in 0..iters {
        f();
    }
    let us = t.elapsed().as_secs_f64() * 1e6 / iters as f64;
    println!("{label:<28} {us:8.3} us/launch");
}

fn main() -> kjit::Result<()> {
    let iters: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    if kjit::device_count().map(|n| n == 0).unwrap_or(true) {
        eprintln!("no CUDA device: nothing to measure");
        std::process::exit(77);
    }
    let cuda = common::Cuda::new();
    let compiler = Compiler::new(None, 0)?;
    let empty = compiler.kernel(
        "extern \"C\" __global__ void empty() {}",
        "empty",
        None,
        0,
        KernelFlags::DEFAULT,
    )?;
    let saxpy = compiler.kernel(common::SAXPY, "saxpy", None, 0, KernelFlags::DEFAULT)?;
    let n = 1024usize;
    let (dx, dy) = (cuda.upload(&vec![1.0; n]), cuda.upload(&vec![2.0; n]));
    let cfg = LaunchConfig::for_elements(n as u32, 256);
    let one = LaunchConfig::default();
    println!(
        "device: {} | {} launches each",
        kjit::device_name(0)?,
        iters
    );
    unsafe {
        per_launch("empty: launch", iters, || empty.launch(&one, &[]).unwrap());
        per_launch("empty: launch_raw", iters, || {
            empty.launch_raw(&one, &mut []).unwrap()
        });
        cuda.synchronize();
        let (ni, a) = (n as i32, 2.0f32);
        per_launch("saxpy: launch (typed)", iters, || {
            saxpy.launch(&cfg, args![ni, a, dx, dy]).unwrap()
        });
        cuda.synchronize();
        let mut buf = saxpy.param_buffer()?;
        buf.push(&ni)?.push(&a)?.push(&dx)?.push(&dy)?;
        per_launch("saxpy: launch_packed", iters, || {
            saxpy.launch_packed(&cfg, buf.as_bytes()).unwrap()
        });
        cuda.synchronize();
        let (mut pn, mut pa, mut px, mut py) = (ni, a, dx.0, dy.0);
        let mut raw = [
            &mut pn as *mut i32 as *mut c_void,
            &mut pa as *mut f32 as *mut c_void,
            &mut px as *mut u64 as *mut c_void,
            &mut py as *mut u64 as *mut c_void,
        ];
        per_launch("saxpy: launch_raw", iters, || {
            saxpy.launch_raw(&cfg, &mut raw).unwrap()
        });
        cuda.synchronize();
    }
    cuda.free(dx);
    cuda.free(dy);
    Ok(())
}
