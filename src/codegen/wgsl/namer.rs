//! Names for WGSL identifiers: readable, unique, never a keyword or a
//! reserved word, never starting with `__`.

use std::collections::HashSet;

/// WGSL keywords, reserved words and predeclared names we must not shadow.
const RESERVED: &[&str] = &[
    // keywords
    "alias",
    "break",
    "case",
    "const",
    "const_assert",
    "continue",
    "continuing",
    "default",
    "diagnostic",
    "discard",
    "else",
    "enable",
    "false",
    "fn",
    "for",
    "if",
    "let",
    "loop",
    "override",
    "requires",
    "return",
    "struct",
    "switch",
    "true",
    "var",
    "while",
    // reserved words
    "NULL",
    "Self",
    "abstract",
    "active",
    "alignas",
    "alignof",
    "as",
    "asm",
    "asm_fragment",
    "async",
    "attribute",
    "auto",
    "await",
    "become",
    "binding_array",
    "cast",
    "catch",
    "class",
    "co_await",
    "co_return",
    "co_yield",
    "coherent",
    "column_major",
    "common",
    "compile",
    "compile_fragment",
    "concept",
    "const_cast",
    "consteval",
    "constexpr",
    "constinit",
    "crate",
    "debugger",
    "decltype",
    "delete",
    "demote",
    "demote_to_helper",
    "do",
    "dynamic_cast",
    "enum",
    "explicit",
    "export",
    "extends",
    "extern",
    "external",
    "fallthrough",
    "filter",
    "final",
    "finally",
    "friend",
    "from",
    "fxgroup",
    "get",
    "goto",
    "groupshared",
    "highp",
    "impl",
    "implements",
    "import",
    "inline",
    "instanceof",
    "interface",
    "layout",
    "lowp",
    "macro",
    "macro_rules",
    "match",
    "mediump",
    "meta",
    "mod",
    "module",
    "move",
    "mut",
    "mutable",
    "namespace",
    "new",
    "nil",
    "noexcept",
    "noinline",
    "nointerpolation",
    "non_coherent",
    "noncoherent",
    "noperspective",
    "null",
    "nullptr",
    "of",
    "operator",
    "package",
    "packoffset",
    "partition",
    "pass",
    "patch",
    "pixelfragment",
    "precise",
    "precision",
    "premerge",
    "priv",
    "protected",
    "pub",
    "public",
    "readonly",
    "ref",
    "regardless",
    "register",
    "reinterpret_cast",
    "require",
    "resource",
    "restrict",
    "self",
    "set",
    "shared",
    "sizeof",
    "smooth",
    "snorm",
    "static",
    "static_assert",
    "static_cast",
    "std",
    "subroutine",
    "super",
    "target",
    "template",
    "this",
    "thread_local",
    "throw",
    "trait",
    "try",
    "type",
    "typedef",
    "typeid",
    "typename",
    "typeof",
    "union",
    "unless",
    "unorm",
    "unsafe",
    "unsized",
    "use",
    "using",
    "varying",
    "virtual",
    "volatile",
    "wgsl",
    "where",
    "with",
    "writeonly",
    "yield",
    // predeclared types and functions we use
    "bool",
    "i32",
    "u32",
    "i64",
    "u64",
    "f32",
    "f64",
    "f16",
    "array",
    "atomic",
    "vec2",
    "vec3",
    "vec4",
    "select",
    "min",
    "max",
    "abs",
    "sqrt",
    "exp",
    "log",
    "sin",
    "cos",
    "floor",
    "ceil",
    "trunc",
    "sign",
    "fma",
    "bitcast",
    "main",
    "read",
    "read_write",
    "storage",
    "uniform",
    "workgroup",
    "function",
    "private",
];

/// Hands out identifiers.
#[derive(Debug, Default)]
pub struct Namer {
    used: HashSet<String>,
}

impl Namer {
    /// A namer with nothing taken yet.
    pub fn new() -> Namer {
        Namer::default()
    }

    /// Whether `name` is a WGSL keyword or reserved word.
    pub fn is_reserved(name: &str) -> bool {
        RESERVED.contains(&name)
    }

    /// A fresh identifier derived from `base`.
    pub fn call(&mut self, base: &str) -> String {
        let mut clean: String = base
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        while clean.starts_with('_') {
            clean.remove(0);
        }
        if clean.is_empty() || clean.starts_with(|c: char| c.is_ascii_digit()) {
            clean.insert(0, 'v');
        }
        if Self::is_reserved(&clean) {
            clean.push('_');
        }
        let mut name = clean.clone();
        let mut n = 1;
        while Self::is_reserved(&name) || !self.used.insert(name.clone()) {
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
    fn avoids_keywords_duplicates_and_bad_starts() {
        let mut n = Namer::new();
        assert_eq!(n.call("loop"), "loop_");
        assert_eq!(n.call("x"), "x");
        assert_eq!(n.call("x"), "x_1");
        assert_eq!(n.call("__y"), "y");
        assert_eq!(n.call("3d"), "v3d");
        assert_eq!(n.call("a-b"), "a_b");
        assert_eq!(n.call("select"), "select_");
    }
}
