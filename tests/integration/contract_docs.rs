//! The contract lives in the repository (docs/DESIGN.md section 16): every link in the docs, every
//! relative path in the code and every "X.md section N" citation must land on a file, a heading or
//! a section that exists here. A clone of the project is all a newcomer has.

use std::{
    collections::HashSet,
    path::{Component, Path, PathBuf},
};

use regex_lite::Regex;

/// The path of the folder beside the repository, spelled in two pieces so that this file does not hold it.
const BESIDE: &str = concat!("..", "/shared/");

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// Every file git tracks, or would track (new files of a change not yet committed).
fn repository_files() -> Vec<String> {
    let out = std::process::Command::new("git")
        .args(["ls-files", "--cached", "--others", "--exclude-standard"])
        .current_dir(root())
        .output()
        .expect("git ls-files");
    assert!(out.status.success(), "git ls-files failed");
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).filter(|f| root().join(f).is_file()).collect()
}

fn is_text(file: &str) -> bool {
    let ext = Path::new(file).extension().and_then(|e| e.to_str()).unwrap_or("");
    matches!(ext, "md" | "rs" | "lua" | "yaml" | "yml" | "toml" | "py" | "json" | "sh" | "env")
        || file.starts_with("scripts/")
        || file.starts_with(".ci/")
}

/// `a/b/../c` as `a/c`; `None` when it climbs above the repository's root.
fn normalise(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    Some(out)
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn headings(markdown: &str) -> HashSet<String> {
    let mut in_code = false;
    let mut found = HashSet::new();
    for line in markdown.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with('#') {
            found.insert(slug(line.trim_start_matches('#')));
        }
    }
    found
}

/// The numbers of a document's `## N.` sections.
fn sections(markdown: &str) -> HashSet<String> {
    let numbered = Regex::new(r"(?m)^##+ (\d+)\.").unwrap();
    numbered.captures_iter(markdown).map(|c| c[1].to_owned()).collect()
}

/// What is wrong with the repository's references; empty when every one lands inside it.
fn broken_references() -> Vec<String> {
    let root = root();
    let files = repository_files();
    let link = Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    let climbing = Regex::new(r#"(?:\.\./)+[A-Za-z0-9_.\-/]*"#).unwrap();
    let citation = Regex::new(r"(?:docs/)?([A-Z]+)\.md sections? (\d+)(?: and (\d+))?").unwrap();
    let mut broken = Vec::new();
    for file in files.iter().filter(|f| is_text(f)) {
        let Ok(text) = std::fs::read_to_string(root.join(file)) else { continue };
        let dir = Path::new(file).parent().unwrap_or(Path::new(""));
        if file.ends_with(".md") {
            for cap in link.captures_iter(&text) {
                let target = &cap[1];
                if target.contains("://") || target.starts_with("mailto:") {
                    broken.push(format!("{file}: {target} leaves the repository"));
                    continue;
                }
                let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
                let resolved = match path {
                    "" => Some(PathBuf::from(file)),
                    // From the repository's root, as GitHub reads a link that starts with `/`.
                    _ if path.starts_with('/') => normalise(Path::new(path.trim_start_matches('/'))),
                    _ => normalise(&dir.join(path)),
                };
                let Some(resolved) = resolved else {
                    broken.push(format!("{file}: {target} leaves the repository"));
                    continue;
                };
                let full = root.join(&resolved);
                if !full.exists() {
                    broken.push(format!("{file}: {target} does not exist"));
                } else if !anchor.is_empty() && resolved.extension().is_some_and(|e| e == "md") {
                    let text = std::fs::read_to_string(&full).unwrap();
                    if !headings(&text).contains(anchor) {
                        broken.push(format!("{file}: {target} names no heading of {}", resolved.display()));
                    }
                }
            }
        }
        // This file's own samples are what the check must refuse.
        let own = file.ends_with("contract_docs.rs");
        // The first contract lived in the folder beside the repository, also named `shared`: a path
        // spelled that way reads as that folder wherever it leads, so the crate is linked from the
        // root instead (`/shared/...`).
        if !own && text.contains(BESIDE) {
            broken.push(format!("{file}: names {BESIDE}, the folder beside the repository; link /shared/... instead"));
        }
        for m in climbing.find_iter(&text).filter(|_| !own) {
            // `.../waitlist` is an elided path in prose, not a relative one.
            if text[..m.start()].ends_with('.') {
                continue;
            }
            let rel = m.as_str().trim_end_matches(['.', '/']);
            if rel.is_empty() || !rel.contains(|c: char| c.is_alphanumeric()) {
                continue;
            }
            // Code joins paths to its file's directory, or to its crate's (`CARGO_MANIFEST_DIR`).
            let manifest = dir.ancestors().find(|d| root.join(d).join("Cargo.toml").exists()).unwrap_or(Path::new(""));
            let bases = [dir, manifest];
            let resolved: Vec<Option<PathBuf>> = bases.iter().map(|b| normalise(&b.join(rel))).collect();
            if resolved.iter().all(Option::is_none) {
                broken.push(format!("{file}: {} leaves the repository", m.as_str()));
            } else if !resolved.iter().flatten().any(|p| root.join(p).exists()) {
                broken.push(format!("{file}: {} does not exist", m.as_str()));
            }
        }
        for cap in citation.captures_iter(&text) {
            let doc = format!("docs/{}.md", &cap[1]);
            let Ok(cited) = std::fs::read_to_string(root.join(&doc)) else {
                broken.push(format!("{file}: cites {}, which is not in docs/", &cap[0]));
                continue;
            };
            let have = sections(&cited);
            for n in [cap.get(2), cap.get(3)].into_iter().flatten() {
                if !have.contains(n.as_str()) {
                    broken.push(format!("{file}: cites {} but {doc} has no section {}", &cap[0], n.as_str()));
                }
            }
        }
    }
    broken.sort();
    broken.dedup();
    broken
}

#[test]
fn every_reference_lands_inside_the_repository() {
    let broken = broken_references();
    assert!(broken.is_empty(), "{} broken references:\n{}", broken.len(), broken.join("\n"));
}

#[test]
fn the_check_catches_what_it_is_for() {
    let sample = "see [the old contract](../../elsewhere/DESIGN.md) and ## 3. Identity";
    let link = Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    let target = &link.captures(sample).unwrap()[1];
    assert_eq!(normalise(&Path::new("docs").join(target)), None, "a link above the root must be refused");
    assert_eq!(normalise(Path::new("tests/integration/../../bench/src")), Some(PathBuf::from("bench/src")));
    assert_eq!(slug("13. Invariants and the audit"), "13-invariants-and-the-audit");
    assert_eq!(slug("`sam local`: every function in a container"), "sam-local-every-function-in-a-container");
    assert!(sections("## 6. Redis\n### 6.1 Cost\n").contains("6"));
}

/// What a script makes again (a Redis dump, a build, a measurement's data) stays out of the
/// repository: one such file, rewritten by each run and committed each time, once made a submission
/// too big to land. The largest file kept by intent is a screenshot of ~140 KB.
const LARGEST_KEPT_FILE: u64 = 512 * 1024;

#[test]
fn no_generated_or_oversized_file_is_kept() {
    let offenders: Vec<String> = repository_files()
        .into_iter()
        .filter(|f| {
            let size = std::fs::metadata(root().join(f)).map(|m| m.len()).unwrap_or(0);
            size > LARGEST_KEPT_FILE || f.ends_with(".rdb") || f.ends_with(".aof")
        })
        .collect();
    assert!(offenders.is_empty(), "files a script makes again, or too large to keep: {offenders:?}");
}
