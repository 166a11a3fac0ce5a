//! Compile and cache paths: these run without a GPU (explicit targets, no driver needed).

mod common;

use common::{TempDir, SAXPY};
use kjit::{Cache, CacheOptions, Compiler, Options, Outputs, Status, Tier};
use std::sync::Arc;

const TARGET: &str = "sm_80";

fn opts() -> Options {
    let mut o = Options::new().unwrap();
    o.target(TARGET).unwrap().add("-std=c++17").unwrap();
    o
}

fn is_hex64(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[test]
fn version_matches_the_headers() {
    assert_eq!(kjit::version(), kjit::sys::KJIT_VERSION);
    assert_eq!(kjit::version_string(), "0.3.0");
    assert!(
        kjit::status_string(5).contains("KJIT_ERROR_COMPILE"),
        "{}",
        kjit::status_string(5)
    );
    assert_eq!(Status::Compile.to_string(), kjit::status_string(5));
}

#[test]
fn nvrtc_version_is_reported() {
    let v = kjit::nvrtc_version().unwrap();
    assert!(v.contains('.'), "{v}");
}

#[test]
fn compiles_saxpy_without_a_cache() {
    let compiler = Compiler::new(None, 0).unwrap();
    let o = opts();
    let bin = compiler.compile(SAXPY, Some(&o)).unwrap();
    assert_eq!(bin.tier(), Tier::Compiled);
    assert_eq!(bin.target(), TARGET);
    assert!(is_hex64(bin.key()), "{}", bin.key());
    assert_eq!(bin.key(), kjit::compute_key(SAXPY, Some(&o)).unwrap());
    let ptx = bin.ptx().expect("PTX output");
    assert!(ptx.contains(".entry saxpy"), "{ptx}");
    assert_eq!(bin.kernel_names(), vec!["saxpy"]);
    let cubin = bin.cubin().expect("CUBIN output for an sm_ target");
    assert_eq!(&cubin[..4], b"\x7fELF");
    assert!(bin.ltoir().is_none());
    assert!(bin.metadata_json().trim_start().starts_with('{'));
    assert!(bin.compile_ms() > 0.0);
}

#[test]
fn ptx_only_for_a_compute_target() {
    let compiler = Compiler::new(None, 0).unwrap();
    let mut o = Options::new().unwrap();
    o.target("compute_80")
        .unwrap()
        .outputs(Outputs::PTX)
        .unwrap();
    let bin = compiler.compile(SAXPY, Some(&o)).unwrap();
    assert!(bin.ptx().is_some());
    assert!(bin.cubin().is_none());
}

#[test]
fn compile_error_carries_status_message_and_log() {
    let compiler = Compiler::new(None, 0).unwrap();
    let err = compiler
        .compile(
            "extern \"C\" __global__ void broken(int* p) { p[0] = undefined_thing; }\n",
            Some(&opts()),
        )
        .unwrap_err();
    assert_eq!(err.status(), Status::Compile);
    assert!(err.log().contains("undefined_thing"), "log: {}", err.log());
    // `{}` is the status and the message only: printing the error and then its log shows
    // the log once. `{:#}` adds the log.
    // (The library's message names the program and quotes the log's first lines.)
    let plain = err.to_string();
    assert_eq!(plain, format!("{}: {}", Status::Compile, err.message()));
    assert!(
        !plain.contains(err.log().trim_end()),
        "display repeats the log: {plain}"
    );
    let alt = format!("{err:#}");
    assert!(alt.starts_with(&plain), "alternate: {alt}");
    assert!(alt.contains("undefined_thing"), "alternate: {alt}");
    assert_eq!(alt, format!("{plain}\n{}", err.log().trim_end()));
    let as_std: &dyn std::error::Error = &err;
    assert_eq!(as_std.to_string(), plain);
}

#[test]
fn errors_without_a_log_print_the_same_either_way() {
    let cache = Cache::open(&CacheOptions {
        memory_only: true,
        ..Default::default()
    })
    .unwrap();
    let err = cache.get("not a key").unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert_eq!(err.log(), "");
    assert_eq!(format!("{err:#}"), err.to_string());
    assert!(err.to_string().contains(err.message()), "{err}");
}

#[test]
fn an_owned_compiler_moves_into_a_thread_and_outlives_the_callers_cache() {
    let dir = TempDir::new("owned");
    let cache = Cache::open_shared(&CacheOptions::in_dir(dir.path())).unwrap();
    let compiler: kjit::OwnedCompiler = Compiler::with_cache(Arc::clone(&cache), 2).unwrap();
    assert!(Arc::ptr_eq(compiler.cache().unwrap(), &cache));
    let want_dir = cache.directory().to_string();
    // The caller lets go of its cache: the compiler's share keeps it open.
    drop(cache);
    let worker = std::thread::spawn(move || {
        let bin = compiler.compile(SAXPY, Some(&opts())).unwrap();
        assert_eq!(bin.tier(), Tier::Compiled);
        let cache = compiler.cache().unwrap();
        assert_eq!(cache.directory(), want_dir);
        assert_eq!(cache.stats().unwrap().compiles, 1);
        (compiler, bin.key().to_string())
    });
    let (compiler, key) = worker.join().unwrap();
    // Back on this thread, the same compiler hits its cache.
    let again = compiler.compile(SAXPY, Some(&opts())).unwrap();
    assert_eq!((again.key(), again.tier()), (key.as_str(), Tier::Memory));
}

#[test]
fn owned_handles_live_in_a_struct_beside_their_cache() {
    struct Jit {
        cache: Arc<Cache>,
        compiler: kjit::OwnedCompiler,
    }
    impl Jit {
        fn new(dir: &std::path::Path) -> kjit::Result<Jit> {
            let cache = Cache::open_shared(&CacheOptions::in_dir(dir))?;
            let compiler = Compiler::with_cache(Arc::clone(&cache), 0)?;
            Ok(Jit { cache, compiler })
        }
    }
    let dir = TempDir::new("owned-struct");
    let jit = Arc::new(Jit::new(dir.path()).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let jit = Arc::clone(&jit);
            std::thread::spawn(move || {
                jit.compiler
                    .compile(SAXPY, Some(&opts()))
                    .unwrap()
                    .key()
                    .to_string()
            })
        })
        .collect();
    let keys: Vec<String> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(keys.windows(2).all(|w| w[0] == w[1]));
    // Single flight: four threads, one compile.
    assert_eq!(jit.cache.stats().unwrap().compiles, 1);
    // A struct that drops its cache field first is still sound: the compiler holds a share.
    let Jit { cache, compiler } = Arc::try_unwrap(jit).ok().unwrap();
    drop(cache);
    assert_eq!(
        compiler.compile(SAXPY, Some(&opts())).unwrap().tier(),
        Tier::Memory
    );
}

/// NVRTC 13.0 dies with SIGSEGV on this source with this name expression
/// (fuzz/nvrtc-crash/): the compile worker, the default mode, turns that into a status for
/// this compile, and this process lives on.
#[test]
fn nvrtc_crash_is_a_status_not_a_dead_process() {
    let compiler = Compiler::new(None, 0).unwrap();
    let mut o = Options::new().unwrap();
    o.target("sm_90").unwrap().name_expression("t<int>").unwrap();
    let e = compiler
        .compile(
            "template <typename ~> __global__ void t(T* p) { *p = T(1); }\n",
            Some(&o),
        )
        .unwrap_err();
    assert_eq!(e.status(), Status::Nvrtc, "{e}");
    assert!(e.message().contains("crashed"), "{e}");
    assert!(compiler.compile(SAXPY, Some(&opts())).is_ok());
}

#[test]
fn bad_inputs_are_reported_not_crashed() {
    let compiler = Compiler::new(None, 0).unwrap();
    assert_eq!(
        compiler.compile("", Some(&opts())).unwrap_err().status(),
        Status::InvalidSource
    );

    let mut bad = opts();
    bad.add("--definitely-not-an-nvrtc-option").unwrap();
    let e = compiler.compile(SAXPY, Some(&bad)).unwrap_err();
    assert_eq!(e.status(), Status::InvalidOption, "{e}");
    assert!(!e.message().is_empty());

    let mut o = Options::new().unwrap();
    match o.target("sm_1") {
        Err(e) => assert_eq!(e.status(), Status::InvalidArgument),
        Ok(_) => {
            let e = compiler.compile(SAXPY, Some(&o)).unwrap_err();
            assert_eq!(e.status(), Status::UnsupportedTarget, "{e}");
        }
    }
}

// C would read a NUL byte as the end of the string and compile (or name, or key) the text
// before it: the bindings refuse such text before calling the library. Code (sources,
// header contents) gets InvalidSource, every other string InvalidArgument.
#[test]
fn nul_bytes_are_refused_before_the_library_sees_them() {
    let compiler = Compiler::new(None, 0).unwrap();
    let o = opts();
    let refused = |r: kjit::Result<()>, status: Status, what: &str| {
        let e = r.expect_err(what);
        assert_eq!(e.status(), status, "{what}: {e}");
        assert!(e.message().contains("NUL byte"), "{what}: {e}");
    };
    // What precedes the NUL is a valid program: cut there, it would compile.
    let src = format!("{SAXPY}\0 garbage that is not CUDA");
    refused(
        compiler.compile(&src, Some(&o)).map(|_| ()),
        Status::InvalidSource,
        "source",
    );
    refused(
        compiler.compile_async(&src, Some(&o)).map(|_| ()),
        Status::InvalidSource,
        "async source",
    );
    refused(
        compiler
            .compile_many(&[SAXPY, src.as_str()], None)
            .map(|_| ()),
        Status::InvalidSource,
        "one of many sources",
    );
    refused(
        kjit::compute_key(&src, Some(&o)).map(|_| ()),
        Status::InvalidSource,
        "source of a key",
    );

    let mut o = opts();
    refused(
        o.name("k.cu\0x").map(|_| ()),
        Status::InvalidArgument,
        "program name",
    );
    refused(
        o.add("-DX=1\0-DY").map(|_| ()),
        Status::InvalidArgument,
        "option",
    );
    refused(
        o.define("X\0", Some("1")).map(|_| ()),
        Status::InvalidArgument,
        "define name",
    );
    refused(
        o.define("X", Some("1\0")).map(|_| ()),
        Status::InvalidArgument,
        "define value",
    );
    refused(
        o.include_path("/tmp\0/x").map(|_| ()),
        Status::InvalidArgument,
        "include path",
    );
    refused(
        o.header("h.h\0", "#define V 1\n").map(|_| ()),
        Status::InvalidArgument,
        "header name",
    );
    refused(
        o.header("h.h", "#define V 1\n\0junk").map(|_| ()),
        Status::InvalidSource,
        "header contents",
    );
    refused(
        o.name_expression("scale<float>\0").map(|_| ()),
        Status::InvalidArgument,
        "name expression",
    );
    refused(
        kjit::hash_options(&["-DX\0"]).map(|_| ()),
        Status::InvalidArgument,
        "hashed option",
    );
    // Nothing was added: the options still compile saxpy as before.
    assert_eq!(
        kjit::compute_key(SAXPY, Some(&o)).unwrap(),
        kjit::compute_key(SAXPY, Some(&opts())).unwrap()
    );
}

#[test]
fn cache_hits_memory_then_disk_with_identical_bytes() {
    let dir = TempDir::new("hits");
    let o = opts();
    let (key, ptx, cubin) = {
        let cache = Cache::open(&CacheOptions::in_dir(dir.path())).unwrap();
        assert_eq!(std::path::Path::new(cache.directory()), dir.path());
        let compiler = Compiler::new(Some(&cache), 0).unwrap();
        let first = compiler.compile(SAXPY, Some(&o)).unwrap();
        assert_eq!(first.tier(), Tier::Compiled);
        let second = compiler.compile(SAXPY, Some(&o)).unwrap();
        assert_eq!(second.tier(), Tier::Memory);
        assert_eq!(first.ptx(), second.ptx());
        let s = cache.stats().unwrap();
        assert_eq!(s.disk_state, kjit::DiskState::Ok, "{}", s.message);
        assert_eq!(s.compiles, 1);
        assert!(s.memory_hits >= 1);
        assert!(s.stores >= 1);
        (
            first.key().to_string(),
            first.ptx().unwrap().to_string(),
            first.cubin().unwrap().to_vec(),
        )
    };

    // A new handle on the same directory: the disk tier serves it.
    let cache = Cache::open(&CacheOptions::in_dir(dir.path())).unwrap();
    let compiler = Compiler::new(Some(&cache), 0).unwrap();
    let hit = compiler.compile(SAXPY, Some(&o)).unwrap();
    assert_eq!(hit.tier(), Tier::Disk);
    assert_eq!(hit.key(), key);
    assert_eq!(hit.ptx().unwrap(), ptx);
    assert_eq!(hit.cubin().unwrap(), &cubin[..]);
    let s = cache.stats().unwrap();
    assert_eq!((s.compiles, s.memory_hits, s.disk_hits), (0, 0, 1));
    // The totals count every handle that used the database: the first one's compile and
    // memory hit, this one's disk hit.
    assert_eq!(s.total_compiles, 1, "{s:?}");
    assert!(s.total_memory_hits >= 1, "{s:?}");
    assert_eq!(s.total_disk_hits, 1, "{s:?}");
    assert_eq!(s.not_stored, 0);
    // No remote tier: no fleet claims, here or in any process.
    assert_eq!((s.remote_claims, s.total_remote_claims), (0, 0), "{s:?}");

    let got = cache.get(&key).unwrap();
    assert_eq!(got.ptx().unwrap(), ptx);
    let list = cache.list().unwrap();
    let entry = list.iter().find(|e| e.key == key).expect("entry listed");
    assert_eq!(entry.target, TARGET);
    assert_eq!(entry.kernels, vec!["saxpy".to_string()]);
    assert!(entry.bytes > 0);
    let (checked, bad) = cache.verify().unwrap();
    assert!(checked >= 1);
    assert_eq!(bad, 0);

    cache.remove(&key).unwrap();
    assert_eq!(cache.get(&key).unwrap_err().status(), Status::NotFound);
    assert_eq!(cache.remove(&key).unwrap_err().status(), Status::NotFound);
    assert_eq!(
        compiler.compile(SAXPY, Some(&o)).unwrap().tier(),
        Tier::Compiled
    );
}

#[test]
fn clear_memory_falls_back_to_disk() {
    let dir = TempDir::new("clearmem");
    let cache = Cache::open(&CacheOptions::in_dir(dir.path())).unwrap();
    let compiler = Compiler::new(Some(&cache), 0).unwrap();
    compiler.compile(SAXPY, Some(&opts())).unwrap();
    cache.clear_memory().unwrap();
    assert_eq!(
        compiler.compile(SAXPY, Some(&opts())).unwrap().tier(),
        Tier::Disk
    );
    cache.clear().unwrap();
    assert_eq!(
        compiler.compile(SAXPY, Some(&opts())).unwrap().tier(),
        Tier::Compiled
    );
}

#[test]
fn read_only_cache_refuses_writes() {
    let dir = TempDir::new("ro");
    let cache = Cache::open(&CacheOptions::in_dir(dir.path())).unwrap();
    let compiler = Compiler::new(Some(&cache), 0).unwrap();
    let bin = compiler.compile(SAXPY, Some(&opts())).unwrap();
    drop(compiler);
    drop(cache);
    let ro = Cache::open(&CacheOptions {
        read_only: true,
        ..CacheOptions::in_dir(dir.path())
    })
    .unwrap();
    assert_eq!(ro.stats().unwrap().disk_state, kjit::DiskState::ReadOnly);
    assert_eq!(ro.put(&bin).unwrap_err().status(), Status::ReadOnly);
    assert_eq!(ro.clear().unwrap_err().status(), Status::ReadOnly);
    // Reads still hit.
    let c = Compiler::new(Some(&ro), 0).unwrap();
    assert_eq!(c.compile(SAXPY, Some(&opts())).unwrap().tier(), Tier::Disk);
}

#[test]
fn export_and_import_move_entries_between_caches() {
    let a = TempDir::new("exp-a");
    let b = TempDir::new("exp-b");
    let file = a.path().join("entries.kjit");
    let key = {
        let cache = Cache::open(&CacheOptions::in_dir(a.path())).unwrap();
        let bin = Compiler::new(Some(&cache), 0)
            .unwrap()
            .compile(SAXPY, Some(&opts()))
            .unwrap();
        assert_eq!(cache.export(&file).unwrap(), 1);
        bin.key().to_string()
    };
    let cache = Cache::open(&CacheOptions::in_dir(b.path())).unwrap();
    assert_eq!(cache.get(&key).unwrap_err().status(), Status::NotFound);
    assert_eq!(cache.import(&file).unwrap(), (1, 0));
    assert_eq!(cache.get(&key).unwrap().key(), key);
    assert!(cache.prune(0).unwrap() >= 1);
    assert_eq!(cache.get(&key).unwrap_err().status(), Status::NotFound);
}

#[test]
fn memory_only_cache_has_no_directory() {
    let cache = Cache::open(&CacheOptions {
        memory_only: true,
        ..Default::default()
    })
    .unwrap();
    assert_eq!(cache.directory(), "");
    assert_eq!(cache.stats().unwrap().disk_state, kjit::DiskState::Disabled);
    let c = Compiler::new(Some(&cache), 0).unwrap();
    assert_eq!(
        c.compile(SAXPY, Some(&opts())).unwrap().tier(),
        Tier::Compiled
    );
    assert_eq!(
        c.compile(SAXPY, Some(&opts())).unwrap().tier(),
        Tier::Memory
    );
}

#[test]
fn name_expressions_map_to_lowered_names() {
    let src = "template <typename T> __global__ void scale(T* x, T a) { x[threadIdx.x] *= a; }\n";
    let mut o = opts();
    o.name_expression("scale<float>").unwrap();
    let bin = Compiler::new(None, 0)
        .unwrap()
        .compile(src, Some(&o))
        .unwrap();
    let lowered = bin
        .lowered_name("scale<float>")
        .expect("lowered name")
        .to_string();
    assert!(lowered.starts_with("_Z"), "{lowered}");
    assert_eq!(
        bin.name_expressions(),
        vec![("scale<float>", lowered.as_str())]
    );
    assert!(bin.lowered_name("scale<double>").is_none());
    assert_eq!(bin.kernel_names(), vec![lowered.as_str()]);
}

#[test]
fn headers_and_defines_are_part_of_the_key() {
    let src = "#include \"factor.h\"\nextern \"C\" __global__ void k(float* x) { x[0] = FACTOR * SCALE; }\n";
    let with = |factor: &str, scale: &str| {
        let mut o = opts();
        o.header("factor.h", &format!("#define FACTOR {factor}\n"))
            .unwrap();
        o.define("SCALE", Some(scale)).unwrap();
        o
    };
    let k1 = kjit::compute_key(src, Some(&with("2", "3"))).unwrap();
    assert_eq!(k1, kjit::compute_key(src, Some(&with("2", "3"))).unwrap());
    assert_ne!(k1, kjit::compute_key(src, Some(&with("4", "3"))).unwrap());
    assert_ne!(k1, kjit::compute_key(src, Some(&with("2", "5"))).unwrap());
    let bin = Compiler::new(None, 0)
        .unwrap()
        .compile(src, Some(&with("2", "3")))
        .unwrap();
    assert_eq!(bin.key(), k1);

    let o = with("2", "3");
    let copy = o.try_clone().unwrap();
    drop(o);
    assert_eq!(kjit::compute_key(src, Some(&copy)).unwrap(), k1);
}

#[test]
fn include_paths_hash_the_included_files() {
    let dir = TempDir::new("inc");
    std::fs::write(dir.path().join("val.h"), "#define VAL 1\n").unwrap();
    let src = "#include \"val.h\"\nextern \"C\" __global__ void k(int* x) { x[0] = VAL; }\n";
    let mut o = opts();
    o.include_path(dir.path()).unwrap();
    let before = kjit::compute_key(src, Some(&o)).unwrap();
    std::fs::write(dir.path().join("val.h"), "#define VAL 2\n").unwrap();
    assert_ne!(before, kjit::compute_key(src, Some(&o)).unwrap());
}

#[test]
fn hashes_are_stable_and_order_sensitive() {
    assert_eq!(
        kjit::hash_source(b"abc").unwrap(),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    let ab_c = kjit::hash_options(&["ab", "c"]).unwrap();
    assert!(is_hex64(&ab_c));
    assert_ne!(ab_c, kjit::hash_options(&["a", "bc"]).unwrap());
    assert_ne!(
        kjit::hash_options(&["a", "b"]).unwrap(),
        kjit::hash_options(&["b", "a"]).unwrap()
    );
}

#[test]
fn async_compile_can_be_taken_once() {
    let compiler = Compiler::new(None, 2).unwrap();
    let mut pending = compiler.compile_async(SAXPY, Some(&opts())).unwrap();
    let bin = pending.wait(None).unwrap();
    assert!(pending.is_ready());
    assert!(bin.ptx().unwrap().contains(".entry saxpy"));
    assert_eq!(
        pending
            .wait(Some(std::time::Duration::ZERO))
            .unwrap_err()
            .status(),
        Status::InvalidArgument
    );

    let mut failing = compiler
        .compile_async("__global__ void f() { nope }", Some(&opts()))
        .unwrap();
    let e = failing.wait(None).unwrap_err();
    assert_eq!(e.status(), Status::Compile);
    assert!(!e.log().is_empty());
}

#[test]
fn compile_many_reports_each_item() {
    let compiler = Compiler::new(None, 2).unwrap();
    let o = opts();
    let results = compiler
        .compile_many(
            &[SAXPY, "__global__ void g() { oops }"],
            Some(&[Some(&o), Some(&o)]),
        )
        .unwrap();
    assert_eq!(results.len(), 2);
    assert!(results[0]
        .as_ref()
        .unwrap()
        .ptx()
        .unwrap()
        .contains("saxpy"));
    let e = results[1].as_ref().unwrap_err();
    assert_eq!(e.status(), Status::Compile);
    assert!(e.log().contains("oops"), "{}", e.log());
    assert_eq!(
        compiler
            .compile_many(&[SAXPY], Some(&[]))
            .unwrap_err()
            .status(),
        Status::InvalidArgument
    );
}

#[test]
fn one_compiler_shared_by_threads() {
    let dir = TempDir::new("threads");
    let cache = Cache::open(&CacheOptions::in_dir(dir.path())).unwrap();
    let compiler = Compiler::new(Some(&cache), 0).unwrap();
    let o = opts();
    let keys: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| s.spawn(|| compiler.compile(SAXPY, Some(&o)).unwrap().key().to_string()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(keys.iter().all(|k| k == &keys[0]));
    assert_eq!(cache.stats().unwrap().compiles, 1);
}

#[test]
fn an_unreachable_remote_tier_never_fails_a_compile() {
    let dir = TempDir::new("remote");
    let cache = Cache::open(&CacheOptions {
        remote_url: Some("redis://127.0.0.1:1".to_string()),
        remote_read_only: true,
        ..CacheOptions::in_dir(dir.path())
    })
    .unwrap();
    let compiler = Compiler::new(Some(&cache), 0).unwrap();
    assert_eq!(
        compiler.compile(SAXPY, Some(&opts())).unwrap().tier(),
        Tier::Compiled
    );
    assert_eq!(
        compiler.compile(SAXPY, Some(&opts())).unwrap().tier(),
        Tier::Memory
    );
    assert_eq!(
        Cache::open(&CacheOptions {
            remote_url: Some("a\0b".into()),
            ..Default::default()
        })
        .unwrap_err()
        .status(),
        Status::InvalidArgument
    );
}
