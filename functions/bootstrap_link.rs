//! The build script of every function (and of the bench's hello, so it is built the same way):
//! the bootstrap is linked as a position-dependent executable (`-no-pie`).
//!
//! Why: a position-independent executable of this size carries about 34,000 relative relocations
//! (830 KB of them) that the dynamic loader applies at every cold start, writing into half a
//! megabyte of relocated data: a third of a function's init (fn-costs, docs/BENCHMARKS.md). Linked
//! at a fixed address, the linker resolves them once. What it costs: the executable's own image is
//! no longer placed at a random address (the stack, the heap and the shared libraries still are);
//! the code is memory-safe Rust, and each function runs alone in its Lambda micro-VM.
//! The objects stay position-independent, so nothing else is rebuilt.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    // Nothing outside this script decides: it reruns only when it changes.
    println!("cargo:rerun-if-env-changed=CARGO_CFG_TARGET_OS");
}
