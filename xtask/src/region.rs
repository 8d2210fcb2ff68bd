//! A generated region of a hand-written file: the lines between a `BEGIN generated: <name>` line
//! and an `END generated: <name>` line (comment syntax is the file's own) are the generator's; the
//! rest of the file stays the author's.

/// `text` with the body of region `name` replaced by `body` (whole lines, each ending in `\n`).
pub fn replace(text: &str, name: &str, body: &str) -> Result<String, String> {
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
