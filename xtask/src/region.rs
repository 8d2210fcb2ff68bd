//! A generated region of a hand-written file: the lines between a `BEGIN generated: <name>` line
//! and an `END generated: <name>` line (comment syntax is the file's own) are the generator's; the
//! rest of the file stays the author's.

use std::{collections::BTreeSet, sync::Mutex};

/// The regions a generator has written, by name: a region no generator writes is an error (a
/// copy left behind when its source went away).
static WRITTEN: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Every region `text` marks, by name, and whether each begins and ends once.
pub fn check(text: &str) -> Result<(), String> {
    let written = WRITTEN.lock().expect("the regions written");
    let named = |line: &str, marker: &str| -> Option<String> {
        let rest = line.split(marker).nth(1)?;
        Some(rest.split(" (").next()?.trim().to_owned())
    };
    let (mut begun, mut ended) = (Vec::new(), Vec::new());
    for line in text.lines().filter(|l| l.contains("cargo xtask gen")) {
        begun.extend(named(line, "BEGIN generated: "));
        ended.extend(named(line, "END generated: "));
    }
    if begun != ended {
        return Err(format!("regions begun {begun:?} and ended {ended:?} differ"));
    }
    match begun.iter().find(|name| !written.contains(*name)) {
        Some(name) => Err(format!("region `{name}` is no generator's: its source is gone, or its name is wrong")),
        None => Ok(()),
    }
}

/// `text` with the body of region `name` replaced by `body` (whole lines, each ending in `\n`).
pub fn replace(text: &str, name: &str, body: &str) -> Result<String, String> {
    WRITTEN.lock().expect("the regions written").insert(name.to_owned());
    let begin = format!("BEGIN generated: {name} (");
    let end = format!("END generated: {name} (");
    let mut out = String::with_capacity(text.len() + body.len());
    let mut lines = text.split_inclusive('\n');
    let mut found = false;
    while let Some(line) = lines.next() {
        out.push_str(line);
        if !marks(line, &begin) {
            continue;
        }
        if found {
            return Err(format!("region `{name}` begins twice"));
        }
        found = true;
        out.push_str(body);
        loop {
            match lines.next() {
                Some(l) if marks(l, &end) => {
                    out.push_str(l);
                    break;
                }
                Some(_) => {}
                None => return Err(format!("region `{name}` never ends (an `END generated: {name}` line)")),
            }
        }
    }
    if found { Ok(out) } else { Err(format!("no region `{name}` (a `BEGIN generated: {name}` line)")) }
}

/// A marker line: the marker followed by the generator's name (so a line that only mentions a
/// region in prose is none).
fn marks(line: &str, marker: &str) -> bool {
    line.contains(marker) && line.contains("cargo xtask gen")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_regions_body_is_rewritten() {
        let text = "a\n# BEGIN generated: r (cargo xtask gen)\nold\n# END generated: r (cargo xtask gen)\nz\n";
        let new = replace(text, "r", "new\nlines\n").unwrap();
        assert_eq!(
            new,
            "a\n# BEGIN generated: r (cargo xtask gen)\nnew\nlines\n# END generated: r (cargo xtask gen)\nz\n"
        );
        assert!(replace(text, "other", "").is_err());
        assert!(replace("# BEGIN generated: r (cargo xtask gen)\nx\n", "r", "").is_err());
    }
}
