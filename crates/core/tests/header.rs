//! include/ickpt.h and include/ickpt_coord.h must be exactly what cbindgen generates from
//! the Rust side, and declare nothing but the API: every name a program sees after
//! `#include <ickpt.h>` (macros, tags, typedefs, enumerators, functions) starts with `ickpt_`
//! or `ICKPT_`, so it cannot clash with the program's own names or with another library's.

use std::collections::BTreeSet;

/// The headers: the file in `include/`, the cbindgen config, the module it is generated
/// from (below `src/capi`), and what it may include.
const HEADERS: &[(&str, &str, &str, &[&str])] = &[
    (
        "ickpt.h",
        "cbindgen.toml",
        "mod.rs",
        &["stddef.h", "stdint.h"],
    ),
    (
        "ickpt_coord.h",
        "cbindgen-coord.toml",
        "coord/mod.rs",
        &["stdint.h", "ickpt.h"],
    ),
];

/// What cbindgen makes of the C API now: the header generated from `module` with `config`.
fn generated(config: &str, module: &str) -> String {
    let crate_dir = env!("CARGO_MANIFEST_DIR");
    let cfg = cbindgen::Config::from_file(format!("{crate_dir}/{config}")).unwrap();
    let mut out = Vec::new();
    // Only the C API's sources: from the whole crate cbindgen also took the `pub const`s of
    // other modules (MADV_COLLAPSE) into the header.
    cbindgen::Builder::new()
        .with_src(format!("{crate_dir}/src/capi/{module}"))
        .with_config(cfg)
        .generate()
        .expect("cbindgen")
        .write(&mut out);
    // C89 forbids the comma cbindgen always writes after an enum's last enumerator.
    String::from_utf8(out).unwrap().replace(",\n} ", "\n} ")
}

#[test]
fn checked_in_headers_match_the_rust_side() {
    for &(file, config, module, _) in HEADERS {
        let generated = generated(config, module);
        let path = format!("{}/../../include/{file}", env!("CARGO_MANIFEST_DIR"));
        if std::env::var_os("ICKPT_BLESS_HEADER").is_some() {
            std::fs::write(&path, &generated).unwrap();
        }
        let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            checked_in == generated,
            "include/{file} differs from the Rust C API; run 'make header' and commit it"
        );
    }
}

/// The generated headers, which the test above holds the checked-in ones to.
#[test]
fn headers_declare_only_ickpt_names() {
    for &(file, config, module, includes) in HEADERS {
        let decl = declarations(&generated(config, module));
        let foreign: Vec<_> = decl
            .names
            .iter()
            .filter(|n| !n.starts_with("ickpt_") && !n.starts_with("ICKPT_"))
            .collect();
        assert!(
            foreign.is_empty(),
            "include/{file} declares names outside the API: {foreign:?}"
        );
        let allowed: BTreeSet<String> = includes.iter().map(|s| s.to_string()).collect();
        assert!(
            decl.includes.is_subset(&allowed),
            "include/{file} includes {:?}; only {allowed:?} may be",
            decl.includes
        );
    }
    let main = declarations(&generated("cbindgen.toml", "mod.rs"));
    for api in ["ickpt_init", "ickpt_config", "ICKPT_OK", "ICKPT_MODE_ASYNC"] {
        assert!(
            main.names.contains(api),
            "{api} not found: the scan is broken"
        );
    }
}

/// The coordination-only calls are in ickpt_coord.h, and only there: a program that
/// includes ickpt.h alone does not see them.
#[test]
fn coordination_calls_are_in_their_own_header() {
    let main = declarations(&generated("cbindgen.toml", "mod.rs")).names;
    let coord = declarations(&generated("cbindgen-coord.toml", "coord/mod.rs")).names;
    for call in [
        "ickpt_config_resolve_sized",
        "ickpt_resolved_config",
        "ickpt_job_prepare",
        "ickpt_global_commit",
        "ickpt_global_latest",
        "ickpt_global_at_most",
        "ickpt_global_version",
        "ickpt_global_pin",
        "ickpt_drained_global",
        "ickpt_discard_newer",
    ] {
        assert!(coord.contains(call), "ickpt_coord.h lacks {call}");
        assert!(!main.contains(call), "ickpt.h declares {call}");
    }
    let both: Vec<_> = main.intersection(&coord).collect();
    assert!(both.is_empty(), "declared in both headers: {both:?}");
}

/// The scan below must find every kind of name, or the test above proves nothing.
#[test]
fn the_declaration_scan_finds_every_kind_of_name() {
    let d = declarations(
        "#ifndef G\n#define G\n#include <stdint.h>\n#define LEAK 25\n/* int commented; */\n\
         #ifdef __cplusplus\nextern \"C\" {\n#endif\n\
         typedef enum tag_e { EA = 0, // c99 comment\n EB = 1 } type_e;\n\
         typedef struct tag_s { uint32_t field; const char *ptr; } type_s;\n\
         struct bare { int x; };\n\
         const char *func(const struct param_tag *p, int32_t count);\n\
         extern int object, second;\n\
         #ifdef __cplusplus\n}\n#endif\n#endif\n",
    );
    let want = [
        "G",
        "LEAK",
        "tag_e",
        "EA",
        "EB",
        "type_e",
        "tag_s",
        "type_s",
        "bare",
        "func",
        "param_tag",
        "object",
        "second",
    ];
    assert_eq!(
        d.names,
        want.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>()
    );
    assert_eq!(d.includes, BTreeSet::from(["stdint.h".to_string()]));
}

#[derive(Default)]
struct Declarations {
    /// Macros, struct/enum/union tags, enumerators, and the declarator of every file-scope
    /// declaration (typedef names, functions, objects). Members and parameters are not
    /// file-scope names and are left out.
    names: BTreeSet<String>,
    /// `#include <...>` targets.
    includes: BTreeSet<String>,
}

const KEYWORDS: &[&str] = &[
    "typedef", "struct", "enum", "union", "const", "volatile", "extern", "static", "void", "char",
    "short", "int", "long", "signed", "unsigned", "float", "double", "restrict", "inline",
];

/// A deliberately small C declaration scanner for the shapes cbindgen writes. Whatever it does
/// not recognise is a panic, so a new shape of declaration gets looked at, not waved through.
fn declarations(header: &str) -> Declarations {
    let mut d = Declarations::default();
    let mut code = String::new();
    for line in strip_comments(header).lines() {
        let t = line.trim();
        let Some(directive) = t.strip_prefix('#') else {
            code.push_str(line);
            code.push('\n');
            continue;
        };
        let mut words = directive.split_whitespace();
        match (words.next(), words.next()) {
            (Some("define"), Some(name)) => {
                d.names.insert(name.split('(').next().unwrap().to_string());
            }
            (Some("include"), Some(file)) => {
                let file = file
                    .trim_start_matches(['<', '"'])
                    .trim_end_matches(['>', '"']);
                d.includes.insert(file.to_string());
            }
            (Some("ifndef" | "ifdef" | "if" | "else" | "endif"), _) => {}
            _ => panic!("unrecognised preprocessor line: {t}"),
        }
    }
    let tokens = tokenize(&code);
    let mut i = 0;
    // Depth of `extern "C" {` blocks: their braces open no declaration.
    let mut linkage = 0;
    while i < tokens.len() {
        if tokens[i] == "extern" && tokens.get(i + 1).is_some_and(|t| t.starts_with('"')) {
            assert_eq!(
                tokens.get(i + 2).map(String::as_str),
                Some("{"),
                "extern \"C\" without a block"
            );
            linkage += 1;
            i += 3;
            continue;
        }
        if tokens[i] == "}" && linkage > 0 {
            linkage -= 1;
            i += 1;
            continue;
        }
        // One declaration: up to the `;` outside braces and parentheses.
        let start = i;
        let mut depth = 0i32;
        while i < tokens.len() && !(depth == 0 && tokens[i] == ";") {
            match tokens[i].as_str() {
                "{" | "(" => depth += 1,
                "}" | ")" => depth -= 1,
                _ => {}
            }
            i += 1;
        }
        assert!(
            i < tokens.len(),
            "declaration without ';': {:?}",
            &tokens[start..]
        );
        declaration(&tokens[start..i], &mut d.names);
        i += 1;
    }
    d
}

fn declaration(tokens: &[String], names: &mut BTreeSet<String>) {
    let ident = |t: &str| t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
    // Tags, wherever they appear (a tag first named in a parameter list is declared too).
    for w in tokens.windows(2) {
        if matches!(w[0].as_str(), "struct" | "enum" | "union") && ident(&w[1]) {
            names.insert(w[1].clone());
        }
    }
    // Enumerators: the first identifier of each comma-separated item of an enum body.
    let mut depth = 0;
    let mut in_enum = false;
    let mut expect_name = false;
    let mut outer = Vec::new();
    for (k, t) in tokens.iter().enumerate() {
        match t.as_str() {
            "{" => {
                depth += 1;
                in_enum = depth == 1 && tokens[..k].iter().rev().take(2).any(|t| t == "enum");
                expect_name = in_enum;
            }
            "}" => {
                depth -= 1;
                in_enum = false;
            }
            "," if in_enum && depth == 1 => expect_name = true,
            _ if depth == 0 => outer.push(t.as_str()),
            _ if expect_name => {
                assert!(ident(t), "unrecognised enumerator: {t}");
                names.insert(t.clone());
                expect_name = false;
            }
            _ => {}
        }
    }
    // Declarators, outside any body: a function's name comes before its parameter list,
    // an object's or typedef's name last.
    let mut parens = 0;
    let mut part: Vec<&str> = Vec::new();
    for t in outer.iter().copied().chain([","]) {
        match t {
            "(" if parens == 0 => {
                let name = part.last().copied().unwrap_or("");
                assert!(
                    ident(name) && !KEYWORDS.contains(&name),
                    "unrecognised declarator in {tokens:?}"
                );
                names.insert(name.to_string());
                part.clear();
                parens += 1;
            }
            "(" => parens += 1,
            ")" => parens -= 1,
            "," if parens == 0 => {
                if let Some(name) = part
                    .iter()
                    .rev()
                    .find(|t| ident(t) && !KEYWORDS.contains(t))
                {
                    names.insert(name.to_string());
                }
                part.clear();
            }
            _ if parens == 0 => part.push(t),
            _ => {}
        }
    }
}

fn strip_comments(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find(['/', '"']) {
        out.push_str(&rest[..i]);
        let r = &rest[i..];
        if let Some(body) = r.strip_prefix("/*") {
            let end = body.find("*/").expect("unterminated comment");
            // Keep the line count: a comment may span lines a directive is on.
            out.extend(body[..end].chars().filter(|&c| c == '\n'));
            out.push(' ');
            rest = &body[end + 2..];
        } else if r.starts_with("//") {
            rest = &r[r.find('\n').unwrap_or(r.len())..];
        } else if let Some(body) = r.strip_prefix('"') {
            let end = body.find('"').expect("unterminated string");
            out.push_str(&r[..end + 2]);
            rest = &body[end + 1..];
        } else {
            out.push('/');
            rest = &r[1..];
        }
    }
    out.push_str(rest);
    out
}

fn tokenize(code: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut chars = code.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c.is_whitespace() {
            continue;
        }
        let mut end = i + c.len_utf8();
        if c.is_ascii_alphanumeric() || c == '_' {
            while let Some(&(j, n)) = chars.peek() {
                if !(n.is_ascii_alphanumeric() || n == '_') {
                    break;
                }
                end = j + n.len_utf8();
                chars.next();
            }
        } else if c == '"' {
            for (j, n) in chars.by_ref() {
                end = j + 1;
                if n == '"' {
                    break;
                }
            }
        }
        tokens.push(code[i..end].to_string());
    }
    tokens
}
