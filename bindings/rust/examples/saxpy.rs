//! Compile saxpy through the machine's kjit cache and, when a GPU is present, run it.
//!
//!     cargo run --example saxpy
//!
//! The cache is $KJIT_CACHE_DIR (or the default location); run it twice to see the second
//! run hit the disk tier.

#[path = "../tests/common/mod.rs"]
mod common;

use kjit::{args, Cache, CacheOptions, Compiler, KernelFlags, LaunchConfig, Options};

fn main() -> kjit::Result<()> {
    let cache = Cache::open(&CacheOptions::default())?;
    let compiler = Compiler::new(Some(&cache), 0)?;

    let gpu = kjit::device_count().map(|n| n > 0).unwrap_or(false);
    let mut opts = Options::new()?;
    opts.add("-std=c++17")?;
    if !gpu {
        // Target "auto" needs a driver; compile for an explicit architecture instead.
        opts.target("sm_80")?;
    }
    let bin = compiler.compile(common::SAXPY, Some(&opts))?;
    println!(
        "kjit {} | saxpy for {} from {:?} (key {}…), {} bytes of PTX, cache at {}",
        kjit::version_string(),
        bin.target(),
        bin.tier(),
        &bin.key()[..12],
        bin.ptx().map_or(0, str::len),
        cache.directory()
    );
    if !gpu {
        println!(
            "no CUDA device here: compiled only ({})",
            kjit::device_count().unwrap_err()
        );
        return Ok(());
    }

    let cuda = common::Cuda::new();
    let kernel = bin.load("saxpy", 0, KernelFlags::DEFAULT)?;
    let n = 1 << 20;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let y: Vec<f32> = vec![1.0; n];
    let (dx, dy) = (cuda.upload(&x), cuda.upload(&y));
    let a = 2.0f32;
    // SAFETY: dx and dy hold n floats each and live until after the synchronize below.
    unsafe {
        kernel.launch(
            &LaunchConfig::for_elements(n as u32, 256),
            args![n as i32, a, dx, dy],
        )?
    };
    cuda.synchronize();
    let out = cuda.download(dy, n);
    let bad = (0..n).filter(|&i| out[i] != a * x[i] + y[i]).count();
    println!(
        "launched {} threads on {}: {} wrong results",
        n,
        kjit::device_name(0)?,
        bad
    );
    cuda.free(dx);
    cuda.free(dy);
    if bad == 0 {
        Ok(())
    } else {
        std::process::exit(1)
    }
}
