//! kjit-sys against the C headers, as the C compiler sees them.
//!
//! The headers are read (`$KJIT_INCLUDE_DIR`, else the source tree's `include/`, else
//! `pkg-config --variable=includedir kjit`), every `typedef struct` and every exported
//! function is listed, and a small C program built with `$CC` (default `cc`) prints
//! `sizeof`, `_Alignof` and every field's `offsetof`/`sizeof`. The Rust declarations must
//! match field for field, on whatever target the tests run.

use kjit_sys::*;
use std::collections::BTreeMap;
use std::mem::{align_of, size_of, MaybeUninit};
use std::path::{Path, PathBuf};
use std::process::Command;

fn size_of_pointee<T>(_: *const T) -> usize {
    size_of::<T>()
}

/// (name, size, align, [(field, offset, size)]) of a Rust struct, for the fields named.
macro_rules! rust_layout {
    ($t:ident { $($f:ident),* $(,)? }) => {{
        let u = MaybeUninit::<$t>::uninit();
        let base = u.as_ptr();
        let mut fields: Vec<(String, usize, usize)> = Vec::new();
        $(
            // SAFETY: only the address of a field of uninitialised memory is taken.
            let p = unsafe { std::ptr::addr_of!((*base).$f) };
            let offset = unsafe { (p as *const u8).offset_from(base as *const u8) } as usize;
            fields.push((stringify!($f).to_string(), offset, size_of_pointee(p)));
        )*
        (stringify!($t).to_string(), (size_of::<$t>(), align_of::<$t>(), fields))
    }};
}

type Layout = (usize, usize, Vec<(String, usize, usize)>);

#[rustfmt::skip]
fn rust_layouts() -> BTreeMap<String, Layout> {
    [
        rust_layout!(kjit_cache_options {
            struct_size, directory, max_size_bytes, memory_max_bytes, read_only, memory_only,
            remote_url, remote_read_only,
        }),
        rust_layout!(kjit_cache_stats {
            struct_size, disk_state, memory_hits, disk_hits, remote_hits, misses, compiles,
            stores, store_failures, corrupt_entries, evictions, waits, compile_ms_saved,
            memory_entries, memory_bytes, disk_entries, disk_bytes, max_size_bytes,
            remote_errors, remote_timeouts, message, total_memory_hits, total_disk_hits,
            total_remote_hits, total_misses, total_compiles, total_corrupt_entries,
            total_evictions, total_remote_errors, total_remote_timeouts,
            total_compile_ms_saved, remote_state, not_stored, pch_created, pch_used,
            pch_failed, total_not_stored, total_pch_created, total_pch_used, total_pch_failed,
            remote_claims, remote_claim_waits, remote_claim_wait_hits,
            remote_claim_wait_timeouts, total_remote_claims, total_remote_claim_waits,
            total_remote_claim_wait_hits, total_remote_claim_wait_timeouts,
        }),
        rust_layout!(kjit_cache_entry_info {
            struct_size, key, target, kernels, bytes, created, last_used, compile_ms,
        }),
        rust_layout!(kjit_worker_info {
            struct_size, running, pch_in_use, pid, uptime_s, idle_s, compiles, failures,
            timeouts, in_flight, crashes, pch_created, pch_used, idle_limit_s, rss_bytes,
        }),
        rust_layout!(kjit_grouped_gemm_desc {
            struct_size, groups, rows, n, k, a_type, b_type, d_type, b_order, activation,
            reserved0, lda, ldb, ldc, ldd, stride_b, stride_bias, alpha, beta, scale_mode,
            reserved1,
        }),
        rust_layout!(kjit_grouped_gemm_options {
            struct_size, tile_n, stages, portable_only, schedule, check_offsets, autotune,
            cluster_m,
        }),
        rust_layout!(kjit_kernel_attributes {
            struct_size, num_regs, static_shared_bytes, const_bytes, local_bytes,
            max_threads_per_block, max_dynamic_shared_bytes, ptx_version, binary_version,
        }),
        rust_layout!(kjit_launch_config {
            struct_size, grid, block, shared_bytes, stream, cluster, cooperative,
        }),
        rust_layout!(kjit_gemm_desc {
            struct_size, order, trans_a, trans_b, m, n, k, lda, ldb, ldc, ldd, a_type, b_type,
            c_type, d_type, compute, epilogue, bias_type, reserved0, batch_count, stride_a,
            stride_b, stride_c, stride_d, stride_bias, alpha, beta, a_scale, b_scale, d_scale,
        }),
        rust_layout!(kjit_gemm_options {
            struct_size, plan_capacity, autotune, autotune_candidates, autotune_warmup,
            autotune_reps, max_workspace_bytes,
        }),
        rust_layout!(kjit_gemm_stats {
            struct_size, runs, memory_hits, disk_hits, misses, heuristic_queries, autotunes,
            disk_rejected, disk_writes, evictions, plans, workspace_bytes,
        }),
    ]
    .into_iter()
    .collect()
}

fn include_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("KJIT_INCLUDE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../include");
    if tree.join("kjit/kjit.h").exists() {
        return tree;
    }
    let out = Command::new(std::env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".into()))
        .args(["--variable=includedir", "kjit"])
        .output()
        .expect("no kjit headers: set KJIT_INCLUDE_DIR or install pkg-config and kjit.pc");
    assert!(
        out.status.success(),
        "pkg-config --variable=includedir kjit failed"
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// The header text without comments.
fn strip_comments(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("/*") {
            rest = r.find("*/").map_or("", |i| &r[i + 2..]);
            out.push(' ');
        } else if let Some(r) = rest.strip_prefix("//") {
            rest = r.find('\n').map_or("", |i| &r[i..]);
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

fn last_ident(decl: &str) -> Option<String> {
    let decl = decl.split('[').next().unwrap_or("").trim_end();
    let name: String = decl
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    (!name.is_empty()).then_some(name)
}

struct Headers {
    /// struct name -> field names in declaration order.
    structs: BTreeMap<String, Vec<String>>,
    functions: Vec<String>,
}

fn read_headers(dir: &Path) -> Headers {
    let mut structs = BTreeMap::new();
    let mut functions = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(dir.join("kjit"))
        .unwrap_or_else(|e| panic!("cannot read {}/kjit: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().map_or(false, |x| x == "h"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no headers under {}/kjit", dir.display());
    for f in files {
        let text = strip_comments(&std::fs::read_to_string(&f).unwrap());
        // Without preprocessor lines (`#define KJIT_EXPORT __attribute__(...)`).
        let text: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect();
        let mut rest = text.as_str();
        while let Some(i) = rest.find("typedef struct ") {
            rest = &rest[i + "typedef struct ".len()..];
            let head_end = rest.find(|c| c == '{' || c == ';').unwrap();
            if rest.as_bytes()[head_end] == b';' {
                continue; // an opaque handle
            }
            let name = rest[..head_end].trim().to_string();
            let body_end = rest.find('}').unwrap();
            // `int64_t m, n, k;` declares three fields.
            let fields = rest[head_end + 1..body_end]
                .split(|c| c == ';' || c == ',')
                .filter(|d| !d.trim().is_empty())
                .map(|d| last_ident(d).unwrap_or_else(|| panic!("cannot parse field {d:?}")))
                .collect();
            structs.insert(name, fields);
            rest = &rest[body_end..];
        }
        let mut rest = text.as_str();
        while let Some(i) = rest.find("KJIT_EXPORT ") {
            rest = &rest[i + "KJIT_EXPORT ".len()..];
            let paren = rest.find('(').unwrap();
            if let Some(name) = last_ident(&rest[..paren]) {
                functions.push(name);
            }
        }
    }
    Headers { structs, functions }
}

/// Compiles and runs a C program that prints the C compiler's layout of every struct.
fn c_layouts(dir: &Path, structs: &BTreeMap<String, Vec<String>>) -> BTreeMap<String, Layout> {
    let mut prog = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <kjit/kjit.h>\nint main(void) {\n",
    );
    for (s, fields) in structs {
        prog += &format!("  printf(\"S {s} %zu %zu\\n\", sizeof({s}), (size_t)_Alignof({s}));\n");
        for f in fields {
            prog += &format!(
                "  printf(\"F {s} {f} %zu %zu\\n\", offsetof({s}, {f}), sizeof((({s}*)0)->{f}));\n"
            );
        }
    }
    prog += "  return 0;\n}\n";
    let work = std::env::temp_dir().join(format!("kjit-sys-layout-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let (src, exe) = (work.join("layout.c"), work.join("layout"));
    std::fs::write(&src, prog).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Werror", "-I"])
        .arg(dir)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}` ($CC): {e}"));
    assert!(
        built.status.success(),
        "{cc} failed on the layout program:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let run = Command::new(&exe).output().unwrap();
    let _ = std::fs::remove_dir_all(&work);
    assert!(run.status.success());
    let mut out: BTreeMap<String, Layout> = BTreeMap::new();
    for line in String::from_utf8(run.stdout).unwrap().lines() {
        let w: Vec<&str> = line.split(' ').collect();
        let n = |i: usize| w[i].parse::<usize>().unwrap();
        match w[0] {
            "S" => {
                out.insert(w[1].to_string(), (n(2), n(3), Vec::new()));
            }
            _ => out
                .get_mut(w[1])
                .unwrap()
                .2
                .push((w[2].to_string(), n(3), n(4))),
        }
    }
    out
}

#[test]
fn every_struct_matches_the_c_compilers_layout() {
    let dir = include_dir();
    let headers = read_headers(&dir);
    let c = c_layouts(&dir, &headers.structs);
    let rust = rust_layouts();
    let c_names: Vec<_> = c.keys().collect();
    let rust_names: Vec<_> = rust.keys().collect();
    assert_eq!(
        rust_names,
        c_names,
        "kjit-sys must declare every struct of {}/kjit",
        dir.display()
    );
    for (name, (size, align, fields)) in &c {
        let (rsize, ralign, rfields) = &rust[name];
        for (i, (f, off, sz)) in fields.iter().enumerate() {
            let r = rfields.get(i);
            assert_eq!(
                r,
                Some(&(f.clone(), *off, *sz)),
                "{name}.{f}: C has (name, offset, size) = ({f}, {off}, {sz})"
            );
        }
        assert_eq!(rfields.len(), fields.len(), "{name}: field count");
        assert_eq!((rsize, ralign), (size, align), "{name}: (size, align)");
    }
}

#[test]
fn every_exported_function_is_declared() {
    let dir = include_dir();
    let headers = read_headers(&dir);
    assert!(
        headers.functions.len() > 50,
        "parsed {:?}",
        headers.functions
    );
    let rust = include_str!("../src/lib.rs");
    let missing: Vec<_> = headers
        .functions
        .iter()
        .filter(|f| !rust.contains(&format!("pub fn {f}(")))
        .collect();
    assert!(missing.is_empty(), "kjit-sys lacks {missing:?}");
}

#[test]
fn the_parser_sees_arrays_pointers_and_opaque_handles() {
    let h = read_headers(&include_dir());
    let stats = &h.structs["kjit_cache_stats"];
    assert!(stats.contains(&"message".to_string()));
    assert_eq!(h.structs["kjit_launch_config"][1], "grid");
    assert_eq!(h.structs["kjit_cache_options"][1], "directory");
    assert_eq!(h.structs["kjit_gemm_desc"][4..7], ["m", "n", "k"]);
    assert!(
        !h.structs.contains_key("kjit_cache"),
        "opaque handles are not structs"
    );
    assert!(h.functions.iter().any(|f| f == "kjit_compile"));
}
