//! `cargo xtask gen` writes every copy of the contract from its one source in the code; `cargo
//! xtask gen --check` writes nothing and fails, naming each file, when a copy has drifted (the test
//! command runs it in its lint phase). The sources and their copies (docs/DESIGN.md section 16):
//!
//! - the route table (`shared/src/http/routes.rs`): template.yaml's integrations, routes, invoke
//!   permissions and throttles per route; DESIGN's per-user limits; the sample events' common parts;
//! - the error codes (`shared/src/http/problem.rs`, `Code`) and the release's warning codes
//!   (`shared/domain/src/warm_fleet.rs`, `WarningCode`): openapi.yaml's enums;
//! - the rights per function (`shared/src/rights.rs`): template.yaml's policies, SECURITY's table;
//! - template.yaml's parameters (and samconfig.toml's production values): DEPLOY's table of them.
//!
//! A copy lives between a `BEGIN generated: <name>` and an `END generated: <name>` line of its
//! file; the rest of each file is hand-written.

mod docs;
mod fixtures;
mod openapi;
mod region;
mod rights;
mod template;

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["gen"] => generate(false),
        ["gen", "--check"] => generate(true),
        _ => {
            eprintln!("usage: cargo xtask gen [--check]");
            ExitCode::from(2)
        }
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").to_path_buf()
}

/// Every generated file with its new text, or why it could not be made.
fn generated(root: &Path) -> Result<Vec<(PathBuf, String)>, String> {
    let read = |p: &str| std::fs::read_to_string(root.join(p)).map_err(|e| format!("{p}: {e}"));
    let in_file = |p: &str, e: String| format!("{p}: {e}");
    let template = read("template.yaml")?;
    let template = template::generate(&template).map_err(|e| in_file("template.yaml", e))?;
    let template = rights::template(&template).map_err(|e| in_file("template.yaml", e))?;
    let mut out = vec![
        (root.join("openapi.yaml"), openapi::generate(&read("openapi.yaml")?).map_err(|e| in_file("openapi.yaml", e))?),
        (
            root.join("docs/DEPLOY.md"),
            docs::deploy(&read("docs/DEPLOY.md")?, &template, &read("samconfig.toml")?)
                .map_err(|e| in_file("docs/DEPLOY.md", e))?,
        ),
        (
            root.join("docs/DESIGN.md"),
            docs::design(&read("docs/DESIGN.md")?).map_err(|e| in_file("docs/DESIGN.md", e))?,
        ),
        (
            root.join("docs/SECURITY.md"),
            rights::security(&read("docs/SECURITY.md")?).map_err(|e| in_file("docs/SECURITY.md", e))?,
        ),
        (root.join("template.yaml"), template),
    ];
    out.extend(fixtures::generate(root)?);
    for (path, text) in &out {
        region::check(text).map_err(|e| format!("{}: {e}", path.strip_prefix(root).unwrap_or(path).display()))?;
    }
    Ok(out)
}

fn generate(check: bool) -> ExitCode {
    let root = root();
    let files = match generated(&root) {
        Ok(files) => files,
        Err(e) => {
            eprintln!("gen: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut drifted = Vec::new();
    for (path, text) in files {
        let now = std::fs::read_to_string(&path).unwrap_or_default();
        if now == text {
            continue;
        }
        let name = path.strip_prefix(&root).unwrap_or(&path).display().to_string();
        if check {
            drifted.push(name);
        } else if let Err(e) = std::fs::write(&path, text) {
            eprintln!("gen: {name}: {e}");
            return ExitCode::FAILURE;
        } else {
            println!("gen: wrote {name}");
        }
    }
    if drifted.is_empty() {
        return ExitCode::SUCCESS;
    }
    eprintln!("gen --check: these copies differ from their sources in the code:");
    for name in &drifted {
        eprintln!("  {name}");
    }
    eprintln!("run `cargo xtask gen` and commit what it writes (docs/DESIGN.md section 16 names each source)");
    ExitCode::FAILURE
}
