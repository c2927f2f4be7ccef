//! Golden files shared by `tests/golden_plans.rs` (optimized plans),
//! `tests/wgpu_backend.rs` (WGSL) and `tests/ptx.rs` (PTX): each case's
//! text is compared with its file under `tests/golden/<kind>/`, every
//! difference is collected with a line diff, and `BLESS=1` rewrites the
//! files instead.
#![allow(dead_code)]

use std::path::PathBuf;

/// The golden files of one kind, and the differences found so far.
pub struct Golden {
    dir: PathBuf,
    bless: bool,
    failures: Vec<String>,
}

impl Golden {
    /// The files under `tests/golden/<kind>/`.
    pub fn new(kind: &str) -> Golden {
        Golden {
            dir: PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("tests/golden")
                .join(kind),
            bless: std::env::var("BLESS").is_ok_and(|v| v == "1"),
            failures: Vec::new(),
        }
    }

    /// Compares `got` with the file `name` (or writes it under `BLESS=1`).
    pub fn check(&mut self, name: &str, got: &str) {
        let file = self.dir.join(name);
        if self.bless {
            std::fs::create_dir_all(&self.dir).unwrap();
            std::fs::write(&file, got).unwrap();
            return;
        }
        match std::fs::read_to_string(&file) {
            Ok(want) if want == got => {}
            Ok(want) => self.failures.push(format!(
                "{} differs (BLESS=1 rewrites it):\n{}",
                file.display(),
                diff_lines(&want, got).join("\n")
            )),
            Err(_) => self
                .failures
                .push(format!("{} is missing (BLESS=1 writes it)", file.display())),
        }
    }

    /// Fails with every difference found.
    #[track_caller]
    pub fn finish(self) {
        assert!(self.failures.is_empty(), "{}", self.failures.join("\n\n"));
    }
}

/// A line diff good enough for short texts: `-` expected, `+` got, with
/// the line number.
pub fn diff_lines(want: &str, got: &str) -> Vec<String> {
    let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    let mut out = Vec::new();
    for i in 0..w.len().max(g.len()) {
        match (w.get(i), g.get(i)) {
            (Some(a), Some(b)) if a == b => {}
            (a, b) => {
                if let Some(a) = a {
                    out.push(format!("{:>3} - {a}", i + 1));
                }
                if let Some(b) = b {
                    out.push(format!("{:>3} + {b}", i + 1));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_diff_names_changed_added_and_removed_lines() {
        assert!(diff_lines("a\nb", "a\nb").is_empty());
        assert_eq!(
            diff_lines("a\nb", "a\nc\nd"),
            ["  2 - b", "  2 + c", "  3 + d"]
        );
        assert_eq!(diff_lines("a\nb", "a"), ["  2 - b"]);
    }
}
