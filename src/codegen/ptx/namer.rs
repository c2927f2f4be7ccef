//! Names for PTX identifiers: readable, unique within a module, and never a
//! directive, a special register or a name the writer reserves for itself.
//!
//! Every name the writer derives from the kernel IR goes through here; the
//! fixed names of the writer (`cq_uniforms`, the `cq_*` helper functions,
//! the register prefixes `%p %r %rd %f %fd`) all start with `cq_` or `%`,
//! which [`Namer::call`] never hands out.

use std::collections::HashSet;

/// Hands out PTX identifiers.
#[derive(Debug, Default)]
pub struct Namer {
    used: HashSet<String>,
}

impl Namer {
    /// A namer with nothing taken yet.
    pub fn new() -> Namer {
        Namer::default()
    }

    /// A fresh identifier derived from `base`: ASCII letters, digits and
    /// `_`, starting with a letter, never starting with `cq_`.
    pub fn call(&mut self, base: &str) -> String {
        let mut clean: String = base
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        while clean.starts_with('_') {
            clean.remove(0);
        }
        if clean.is_empty() || clean.starts_with(|c: char| c.is_ascii_digit()) {
            clean.insert(0, 'v');
        }
        if clean.starts_with("cq_") {
            clean.insert(0, 'v');
        }
        let mut name = clean.clone();
        let mut n = 1;
        while !self.used.insert(name.clone()) {
            name = format!("{clean}_{n}");
            n += 1;
        }
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_clean_and_unique() {
        let mut n = Namer::new();
        assert_eq!(n.call("store"), "store");
        assert_eq!(n.call("store"), "store_1");
        assert_eq!(n.call("__x"), "x");
        assert_eq!(n.call("3d"), "v3d");
        assert_eq!(n.call("a.b"), "a_b");
        assert_eq!(n.call("cq_uniforms"), "vcq_uniforms");
        assert_eq!(n.call(""), "v");
    }
}
