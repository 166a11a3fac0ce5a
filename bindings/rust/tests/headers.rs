//! Header edits and the cache: a hit is never stale after a header changes, and a compile
//! that reads a file the cache key does not cover is not stored. These run without a GPU.

mod common;

use common::TempDir;
use kjit::{Binary, Cache, CacheOptions, Compiler, Options, Outputs, Tier};
use std::fs;
use std::os::raw::{c_int, c_long};
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::time::Duration;

const KERNEL: &str = "extern \"C\" __global__ void k(int* out) { out[0] = V; }\n";

#[repr(C)]
struct Timespec {
    tv_sec: c_long,
    tv_nsec: c_long,
}

extern "C" {
    fn futimens(fd: c_int, times: *const Timespec) -> c_int;
}

/// Rewrites `path` with `contents` of the same size and puts its access and modification
/// times back: only the bytes (and the inode's change time) differ afterwards.
fn rewrite_keeping_size_and_mtime(path: &Path, contents: &str) {
    let before = fs::metadata(path).unwrap();
    assert_eq!(before.len(), contents.len() as u64, "not the same size");
    fs::write(path, contents).unwrap();
    let times = [
        Timespec {
            tv_sec: before.atime() as c_long,
            tv_nsec: before.atime_nsec() as c_long,
        },
        Timespec {
            tv_sec: before.mtime() as c_long,
            tv_nsec: before.mtime_nsec() as c_long,
        },
    ];
    let file = fs::File::open(path).unwrap();
    assert_eq!(unsafe { futimens(file.as_raw_fd(), times.as_ptr()) }, 0);
    let after = fs::metadata(path).unwrap();
    assert_eq!(
        (after.len(), after.mtime(), after.mtime_nsec()),
        (before.len(), before.mtime(), before.mtime_nsec())
    );
}

/// PTX for sm_90 (needs no GPU), program name `name` when given.
fn ptx_options(name: Option<&Path>) -> Options {
    let mut o = Options::new().unwrap();
    o.target("sm_90").unwrap().outputs(Outputs::PTX).unwrap();
    if let Some(n) = name {
        o.name(n.to_str().unwrap()).unwrap();
    }
    o
}

fn compile(compiler: &Compiler, source: &str, opts: &Options) -> Binary {
    compiler
        .compile(source, Some(opts))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The PTX holds `want` and none of the other values V takes in these tests.
fn assert_value(bin: &Binary, want: &str) {
    let ptx = bin.ptx().expect("PTX output");
    for v in ["111", "222", "33333"] {
        assert_eq!(ptx.contains(v), v == want, "V = {want} expected:\n{ptx}");
    }
}

/// Compiles `source` (which includes `header` through `opts`) through a fresh cache while
/// the header changes: a hit first, then an edit that keeps the size and modification
/// time, then one that changes the size. Every edit must be a miss with the new value.
fn edits_are_never_served_stale(header: &Path, source: &str, opts: &Options) {
    // kjit remembers a header's contents while stat() says it is unchanged and it was
    // last changed at least 2 s before it was read; let the header settle so that the
    // first compile leaves such a memo for the same-size, same-mtime edit to fool.
    std::thread::sleep(Duration::from_millis(2500));
    let dir = TempDir::new("stale-cache");
    let cache = Cache::open(&CacheOptions::in_dir(dir.path())).unwrap();
    let compiler = Compiler::new(Some(&cache), 0).unwrap();

    let first = compile(&compiler, source, opts);
    assert_eq!(first.tier(), Tier::Compiled);
    assert_value(&first, "111");
    let hit = compile(&compiler, source, opts);
    assert_eq!(hit.tier(), Tier::Memory);
    assert_value(&hit, "111");

    rewrite_keeping_size_and_mtime(header, "#define V 222\n");
    let edited = compile(&compiler, source, opts);
    assert_eq!(
        edited.tier(),
        Tier::Compiled,
        "same size and mtime: stale hit"
    );
    assert_value(&edited, "222");
    assert_ne!(edited.key(), first.key());

    fs::write(header, "#define V 33333\n").unwrap();
    let resized = compile(&compiler, source, opts);
    assert_eq!(resized.tier(), Tier::Compiled, "new size: stale hit");
    assert_value(&resized, "33333");

    let s = cache.stats().unwrap();
    assert_eq!((s.compiles, s.stores, s.not_stored), (3, 3, 0), "{s:?}");
    drop(compiler);
    drop(cache);

    // Another handle on the same database: the current header's entry, from disk.
    let cache = Cache::open(&CacheOptions::in_dir(dir.path())).unwrap();
    let again = compile(&Compiler::new(Some(&cache), 0).unwrap(), source, opts);
    assert_eq!(again.tier(), Tier::Disk);
    assert_value(&again, "33333");
}

// `#include "h.h"` next to the source, the program named by its absolute path.
#[test]
fn header_next_to_a_source_named_by_its_absolute_path() {
    let dir = TempDir::new("stale-abs");
    let source = format!("#include \"h.h\"\n{KERNEL}");
    let k = dir.path().join("k.cu");
    fs::write(&k, &source).unwrap();
    fs::write(dir.path().join("h.h"), "#define V 111\n").unwrap();
    edits_are_never_served_stale(&dir.path().join("h.h"), &source, &ptx_options(Some(&k)));
}

// `#include <h.h>` found through -I<dir>, the program with the default name.
#[test]
fn header_found_through_an_include_path() {
    let dir = TempDir::new("stale-inc");
    fs::write(dir.path().join("h.h"), "#define V 111\n").unwrap();
    let mut o = ptx_options(None);
    o.add(&format!("-I{}", dir.path().display())).unwrap();
    edits_are_never_served_stale(
        &dir.path().join("h.h"),
        &format!("#include <h.h>\n{KERNEL}"),
        &o,
    );
}

// NVRTC looks for `../other/h.h` relative to the source's directory, which a computed
// include hides from kjit's scan: the key comes from what NVRTC read, so the result is
// stored, hit next time, and an edit of the header is a miss with the new code.
#[test]
fn a_read_the_scan_cannot_foresee_is_in_the_key() {
    let dir = TempDir::new("unforeseen");
    fs::create_dir_all(dir.path().join("src")).unwrap();
    fs::create_dir_all(dir.path().join("other")).unwrap();
    fs::write(dir.path().join("other/h.h"), "#define V 111\n").unwrap();
    let source = format!("#define STR(x) #x\n#include STR(../other/h.h)\n{KERNEL}");
    let k = dir.path().join("src/k.cu");
    fs::write(&k, &source).unwrap();
    let opts = ptx_options(Some(&k));

    let cache_dir = TempDir::new("unforeseen-cache");
    let cache = Cache::open(&CacheOptions::in_dir(cache_dir.path())).unwrap();
    let compiler = Compiler::new(Some(&cache), 0).unwrap();
    let first = compile(&compiler, &source, &opts);
    assert_eq!(first.tier(), Tier::Compiled);
    assert_value(&first, "111");
    let s = cache.stats().unwrap();
    assert_eq!((s.compiles, s.not_stored, s.stores), (1, 0, 1), "{s:?}");

    let second = compile(&compiler, &source, &opts);
    assert_ne!(second.tier(), Tier::Compiled, "the stored result was not used");
    assert_value(&second, "111");

    fs::write(dir.path().join("other/h.h"), "#define V 222\n").unwrap();
    let edited = compile(&compiler, &source, &opts);
    assert_eq!(edited.tier(), Tier::Compiled, "an edit of the header was not seen");
    assert_value(&edited, "222");
}

/// The toolkit's headers need no include option; turned off, NVRTC cannot find them.
#[test]
fn toolkit_headers_without_include_options() {
    let compiler = Compiler::new(None, 0).unwrap();
    let source = "#include <cuda_fp16.h>\nextern \"C\" __global__ void k(__half* p) { *p = __float2half(1.0f); }\n";
    let mut on = ptx_options(None);
    on.pch(false).unwrap();
    let bin = compile(&compiler, source, &on);
    assert!(bin.ptx().expect("PTX output").contains(".entry k"));
    let mut off = ptx_options(None);
    off.toolkit(Some("")).unwrap();
    let err = compiler.compile(source, Some(&off)).err().expect("no toolkit: compile error");
    assert!(format!("{err}").contains("cuda_fp16.h"), "{err}");
}
