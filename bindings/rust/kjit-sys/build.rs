// Finds libkjit for linking.
//
// 1. KJIT_LIB_DIR=/path/to/dir/with/libkjit.so  (no pkg-config needed)
// 2. the `pkg-config` program (or $PKG_CONFIG) asked for `kjit`
//    (set PKG_CONFIG_PATH=<prefix>/lib/pkgconfig for a non-system install)
//
// No rpath is embedded: at run time the dynamic loader finds libkjit.so.0 through the
// system paths or LD_LIBRARY_PATH, so test binaries can be copied to another machine.

use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=KJIT_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_LIBDIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_SYSROOT_DIR");

    if let Ok(dir) = env::var("KJIT_LIB_DIR") {
        if !dir.is_empty() {
            let so = std::path::Path::new(&dir).join("libkjit.so");
            if !so.exists() {
                panic!(
                    "\n\nkjit-sys: KJIT_LIB_DIR={dir} does not contain libkjit.so.\n\
                     Point KJIT_LIB_DIR at the directory holding libkjit.so (e.g. <prefix>/lib \
                     or the CMake build directory).\n\n"
                );
            }
            println!("cargo:rustc-link-search=native={dir}");
            println!("cargo:rustc-link-lib=dylib=kjit");
            println!("cargo:lib_dir={dir}");
            return;
        }
    }

    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let output = Command::new(&pkg_config).args(["--libs", "kjit"]).output();
    let output = match output {
        Ok(o) => o,
        Err(e) => panic!(
            "\n\nkjit-sys: could not run `{pkg_config}` ({e}).\n\
             Install pkg-config (Debian: apt-get install pkg-config), or set KJIT_LIB_DIR to \
             the directory that holds libkjit.so.\n\n"
        ),
    };
    if !output.status.success() {
        panic!(
            "\n\nkjit-sys: `{pkg_config} --libs kjit` failed:\n{}\n\
             Install kjit (cmake --install <build> --prefix <prefix>) and set \
             PKG_CONFIG_PATH=<prefix>/lib/pkgconfig, or set KJIT_LIB_DIR to the directory \
             that holds libkjit.so.\n\n",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let flags = String::from_utf8_lossy(&output.stdout).to_string();
    let mut linked = false;
    for flag in flags.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
            println!("cargo:lib_dir={dir}");
        } else if let Some(lib) = flag.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={lib}");
            linked |= lib == "kjit";
        }
    }
    if !linked {
        panic!("\n\nkjit-sys: `{pkg_config} --libs kjit` printed no -lkjit: {flags}\n\n");
    }
}
