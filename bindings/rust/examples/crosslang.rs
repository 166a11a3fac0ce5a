//! The Rust leg of the cross-language cache test (driven by bindings/test_bindings.sh):
//!
//!     crosslang <cache-dir> <source.cu> <ptx-out> <expected-tier: compiled|memory|disk>
//!
//! Compiles the source with the options every leg uses (target sm_80, -std=c++17,
//! -DBLOCK=256, PTX + CUBIN), writes the PTX and fails unless the tier is as expected.

use kjit::{Cache, CacheOptions, Compiler, Options, Outputs, Tier};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 5 {
        eprintln!(
            "usage: {} <cache-dir> <source.cu> <ptx-out> <compiled|memory|disk>",
            a[0]
        );
        std::process::exit(2);
    }
    let source = std::fs::read_to_string(&a[2]).expect("read source");
    let run = || -> kjit::Result<Tier> {
        let cache = Cache::open(&CacheOptions::in_dir(&a[1]))?;
        let compiler = Compiler::new(Some(&cache), 0)?;
        let mut opts = Options::new()?;
        opts.target("sm_80")?
            .add("-std=c++17")?
            .define("BLOCK", Some("256"))?
            .outputs(Outputs::PTX | Outputs::CUBIN)?;
        let bin = compiler.compile(&source, Some(&opts))?;
        std::fs::write(&a[3], bin.ptx().expect("PTX").as_bytes()).expect("write PTX");
        println!("rust: key {} tier {:?}", bin.key(), bin.tier());
        Ok(bin.tier())
    };
    let tier = match run() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("rust: {e:#}");
            std::process::exit(1);
        }
    };
    let want = match a[4].as_str() {
        "compiled" => Tier::Compiled,
        "memory" => Tier::Memory,
        "disk" => Tier::Disk,
        other => {
            eprintln!("unknown tier {other}");
            std::process::exit(2);
        }
    };
    if tier != want {
        eprintln!("rust: expected tier {want:?}, got {tier:?}");
        std::process::exit(1);
    }
}
