//! The pages bundle pinned npm packages (web/package-lock.json: the API reference's viewer, the
//! door's QR decoder), compiled into the binary: nothing is fetched from a CDN at run time. When
//! `web/node_modules` is missing or older than the lock file, `npm ci` installs exactly what the
//! lock names (install scripts off: none of the three needs one).

use std::{path::Path, process::Command};

fn main() {
    let web = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lock = web.join("package-lock.json");
    let installed = web.join("node_modules/.package-lock.json");
    println!("cargo:rerun-if-changed={}", lock.display());
    println!("cargo:rerun-if-changed={}", installed.display());
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let current = matches!((modified(&installed), modified(&lock)), (Some(i), Some(l)) if i >= l);
    if current {
        return;
    }
    let status = Command::new("npm")
        .args(["ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(web)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("`npm ci` in web/ failed ({s}): the pages bundle its npm packages at build time"),
        Err(e) => panic!("`npm ci` in web/ could not run ({e}): the pages need Node.js and npm at build time"),
    }
}
