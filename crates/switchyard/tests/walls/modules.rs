//! The library's modules as the walls see them: which files they are, what each names and
//! what every `use` makes a name stand for. A reading of the source, not a compiler: comments
//! and literals are blanked first, so a path only counts where code writes it, and every path
//! is resolved through the `use`s (re-exports, aliases, globs) to what it can stand for.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path from the crate root (`["proxy", "login"]`); empty for the root.
pub(crate) type ModulePath = Vec<String>;

/// A path written in code, as it appears, in the module where it appears.
#[derive(Debug)]
pub(crate) struct Mention {
    pub(crate) file: String,
    pub(crate) line: usize,
    pub(crate) module: ModulePath,
    pub(crate) written: Vec<String>,
}

/// The library crate: every file reached from its root through `mod` declarations.
#[derive(Debug, Default)]
pub(crate) struct Crate {
    /// Each file's module, by the file's path from the source directory.
    pub(crate) files: BTreeMap<String, ModulePath>,
    pub(crate) mentions: Vec<Mention>,
    /// What a `use` in a module makes `module::name` stand for.
    aliases: BTreeMap<ModulePath, BTreeSet<ModulePath>>,
    /// The modules whose items a module's glob `use`s bring in.
    globs: BTreeMap<ModulePath, BTreeSet<ModulePath>>,
}

impl Crate {
    /// Reads the crate whose root is `root` (`lib.rs`), relative to its directory, through
    /// `read` (the file system, or a test's sources).
    pub(crate) fn read(root: &str, read: &dyn Fn(&Path) -> Option<String>) -> Self {
        let mut krate = Self::default();
        let mut todo = vec![(PathBuf::from(root), ModulePath::new())];
        while let Some((file, module)) = todo.pop() {
            let text = read(&file).unwrap_or_else(|| panic!("cannot read {}", file.display()));
            let name = file.to_string_lossy().into_owned();
            let tokens = tokenize(&sanitize(&text));
            let children = Scanner::new(&tokens, &name, &module, &mut krate).scan();
            for (inline, child) in children {
                let found = child_files(&file, &inline, &child)
                    .into_iter()
                    .find(|f| read(f).is_some())
                    .unwrap_or_else(|| panic!("no file for `mod {child};` in {name}"));
                let mut path = module.clone();
                path.extend(inline.into_iter().chain([child]));
                todo.push((found, path));
            }
            krate.files.insert(name, module);
        }
        krate
    }

    /// Everything `path` (absolute) can stand for, itself included, following every `use`.
    pub(crate) fn meanings(&self, path: ModulePath) -> BTreeSet<ModulePath> {
        // Enough for any chain of re-exports; a cycle of globs stops here too.
        const MOST: usize = 256;
        let mut seen = BTreeSet::new();
        let mut todo = vec![path];
        while let Some(path) = todo.pop() {
            if seen.len() >= MOST || !seen.insert(path.clone()) {
                continue;
            }
            for k in 0..path.len() {
                let rest = &path[k + 1..];
                for target in self.aliases.get(&path[..=k]).into_iter().flatten() {
                    todo.push(target.iter().chain(rest).cloned().collect());
                }
                for target in self.globs.get(&path[..k]).into_iter().flatten() {
                    todo.push(target.iter().chain(&path[k..]).cloned().collect());
                }
            }
        }
        seen
    }
}

/// Where the file of `mod child;` can be, declared in `file` inside its inline modules
/// `inline`.
fn child_files(file: &Path, inline: &[String], child: &str) -> [PathBuf; 2] {
    let dir = file.parent().unwrap_or(Path::new(""));
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    let mut dir = match stem {
        "lib" | "main" | "mod" => dir.to_path_buf(),
        _ => dir.join(stem),
    };
    dir.extend(inline);
    [dir.join(format!("{child}.rs")), dir.join(child).join("mod.rs")]
}

/// Resolves `written` in `module` to a path from the crate root; `None` for what is outside
/// the crate or relative to a type.
pub(crate) fn absolute(module: &[String], written: &[String]) -> Option<ModulePath> {
    let first = written.first()?;
    match first.as_str() {
        "crate" => Some(written[1..].to_vec()),
        "self" => Some(module.iter().chain(&written[1..]).cloned().collect()),
        "super" => {
            let up = written.iter().take_while(|s| *s == "super").count();
            let kept = module.len().checked_sub(up)?;
            Some(module[..kept].iter().chain(&written[up..]).cloned().collect())
        }
        "Self" | EXTERN => None,
        // A name in scope here: an item or a `use` of this module. (Names of other crates
        // resolve to nothing the walls forbid.)
        _ => Some(module.iter().chain(written).cloned().collect()),
    }
}

/// Stands for a leading `::`, which names another crate.
const EXTERN: &str = "::";

/// `text` with every comment and literal blanked (newlines kept, so lines still count).
fn sanitize(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let end = skipped_end(&chars, i);
        if end > i {
            out.extend(chars[i..end].iter().map(|&c| if c == '\n' { '\n' } else { ' ' }));
            i = end;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// Where the comment or literal that starts at `i` ends; `i` when none starts there.
fn skipped_end(c: &[char], i: usize) -> usize {
    let after_ident = i > 0 && is_ident(c[i - 1]);
    match (c[i], c.get(i + 1).copied()) {
        ('/', Some('/')) => c[i..].iter().position(|&x| x == '\n').map_or(c.len(), |n| i + n),
        ('/', Some('*')) => block_comment_end(c, i),
        ('"', _) => quoted_end(c, i + 1),
        ('\'', _) => char_end(c, i),
        ('r' | 'b' | 'c', _) if !after_ident => prefixed_end(c, i),
        _ => i,
    }
}

fn is_ident(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// Block comments nest.
fn block_comment_end(c: &[char], mut i: usize) -> usize {
    let mut depth = 0;
    while i < c.len() {
        match (c[i], c.get(i + 1).copied()) {
            ('/', Some('*')) => (depth, i) = (depth + 1, i + 2),
            ('*', Some('/')) if depth == 1 => return i + 2,
            ('*', Some('/')) => (depth, i) = (depth - 1, i + 2),
            _ => i += 1,
        }
    }
    c.len()
}

/// The end of a string whose text starts at `i`, past its closing quote.
fn quoted_end(c: &[char], mut i: usize) -> usize {
    while i < c.len() {
        match c[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    c.len()
}

/// A character literal, or nothing (a lifetime or a label).
fn char_end(c: &[char], i: usize) -> usize {
    if c.get(i + 1) == Some(&'\\') {
        let rest = c.get(i + 3..).unwrap_or_default();
        return rest.iter().position(|&x| x == '\'').map_or(c.len(), |n| i + 3 + n + 1);
    }
    if c.get(i + 2) == Some(&'\'') { i + 3 } else { i }
}

/// `b"…"`, `r#"…"#`, `br"…"`, `c"…"`, `b'…'`, or nothing (an identifier).
fn prefixed_end(c: &[char], i: usize) -> usize {
    let prefix = c[i..].iter().take(2).take_while(|x| matches!(x, 'r' | 'b' | 'c')).count();
    let raw = c[i..i + prefix].contains(&'r');
    let mut j = i + prefix;
    let hashes = if raw { c[j..].iter().take_while(|&&x| x == '#').count() } else { 0 };
    j += hashes;
    match c.get(j) {
        Some('"') if raw => {
            let closing: Vec<char> = std::iter::once('"').chain((0..hashes).map(|_| '#')).collect();
            c[j + 1..]
                .windows(closing.len())
                .position(|w| w == closing.as_slice())
                .map_or(c.len(), |n| j + 1 + n + closing.len())
        }
        Some('"') => quoted_end(c, j + 1),
        Some('\'') if prefix == 1 && c[i] == 'b' => char_end(c, j),
        _ => i,
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    Ident(String),
    PathSep,
    Open,
    Close,
    Comma,
    Semi,
    Star,
    Other(char),
}

#[derive(Debug)]
struct Token {
    kind: Kind,
    line: usize,
}

fn tokenize(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let (mut tokens, mut line, mut i) = (Vec::new(), 1, 0);
    while i < chars.len() {
        let c = chars[i];
        let (kind, len) = if is_ident(c) {
            let len = chars[i..].iter().take_while(|&&x| is_ident(x)).count();
            let word: String = chars[i..i + len].iter().collect();
            // A number is no path segment.
            let kind = if c.is_ascii_digit() { Kind::Other('0') } else { Kind::Ident(word) };
            (kind, len)
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            (Kind::PathSep, 2)
        } else {
            let kind = match c {
                '{' => Kind::Open,
                '}' => Kind::Close,
                ',' => Kind::Comma,
                ';' => Kind::Semi,
                '*' => Kind::Star,
                _ => Kind::Other(c),
            };
            (kind, 1)
        };
        if !c.is_whitespace() {
            tokens.push(Token { kind, line });
        }
        line += chars[i..i + len].iter().filter(|&&x| x == '\n').count();
        i += len;
    }
    tokens
}

/// One file's tokens, read once: its `use`s into the crate's aliases, its paths into the
/// crate's mentions, its `mod` declarations returned.
struct Scanner<'a> {
    tokens: &'a [Token],
    at: usize,
    file: &'a str,
    krate: &'a mut Crate,
    /// The file's module, then the inline modules open here, each with the brace depth
    /// outside it.
    modules: Vec<(ModulePath, usize)>,
    depth: usize,
}

impl<'a> Scanner<'a> {
    fn new(tokens: &'a [Token], file: &'a str, module: &ModulePath, krate: &'a mut Crate) -> Self {
        Self { tokens, at: 0, file, krate, modules: vec![(module.clone(), 0)], depth: 0 }
    }

    fn kind(&self, at: usize) -> Option<&'a Kind> {
        self.tokens.get(at).map(|t| &t.kind)
    }

    fn module(&self) -> ModulePath {
        self.modules.last().map(|(m, _)| m.clone()).unwrap_or_default()
    }

    /// Returns the `mod name;` declarations: the inline modules they are in, and the name.
    fn scan(mut self) -> Vec<(Vec<String>, String)> {
        let mut children = Vec::new();
        while let Some(kind) = self.kind(self.at) {
            match kind {
                Kind::Ident(word) if word == "use" => self.use_declaration(),
                Kind::Ident(word) if word == "mod" => {
                    if let Some(child) = self.module_declaration() {
                        let outer = self.modules[0].0.len();
                        children.push((self.module()[outer..].to_vec(), child));
                    }
                }
                Kind::Open => (self.depth, self.at) = (self.depth + 1, self.at + 1),
                Kind::Close => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.modules.len() > 1
                        && self.modules.last().is_some_and(|m| m.1 == self.depth)
                    {
                        self.modules.pop();
                    }
                    self.at += 1;
                }
                Kind::Ident(_)
                    if self.at == 0 || self.kind(self.at - 1) != Some(&Kind::PathSep) =>
                {
                    self.mention();
                }
                _ => self.at += 1,
            }
        }
        children
    }

    /// `mod name;` (returned) or `mod name {` (entered).
    fn module_declaration(&mut self) -> Option<String> {
        let (Some(Kind::Ident(name)), next) = (self.kind(self.at + 1), self.kind(self.at + 2))
        else {
            self.at += 1;
            return None;
        };
        self.at += 3;
        match next {
            Some(Kind::Semi) => Some(name.clone()),
            Some(Kind::Open) => {
                let mut inner = self.module();
                inner.push(name.clone());
                self.modules.push((inner, self.depth));
                self.depth += 1;
                None
            }
            _ => {
                self.at -= 1;
                None
            }
        }
    }

    /// A path in code: `a::b::c`. A lone name is a variable or an item of this module, never
    /// another module's.
    fn mention(&mut self) {
        let line = self.tokens[self.at].line;
        let mut written = Vec::new();
        while let Some(Kind::Ident(segment)) = self.kind(self.at) {
            written.push(segment.clone());
            self.at += 1;
            if self.kind(self.at) != Some(&Kind::PathSep) {
                break;
            }
            self.at += 1;
        }
        let keyword = matches!(written[0].as_str(), "crate" | "self" | "super");
        if written.len() > 1 || keyword {
            let module = self.module();
            self.krate.mentions.push(Mention { file: self.file.into(), line, module, written });
        }
    }

    /// `use tree;`, or the `use<…>` of a bound.
    fn use_declaration(&mut self) {
        self.at += 1;
        if self.kind(self.at) == Some(&Kind::Other('<')) {
            return;
        }
        self.use_tree(&[]);
        while !matches!(self.kind(self.at), Some(Kind::Semi) | None) {
            self.at += 1;
        }
    }

    fn use_tree(&mut self, prefix: &[String]) {
        let line = self.tokens.get(self.at).map_or(0, |t| t.line);
        let mut written = prefix.to_vec();
        if self.kind(self.at) == Some(&Kind::PathSep) {
            written.push(EXTERN.into());
            self.at += 1;
        }
        loop {
            match self.kind(self.at) {
                Some(Kind::Ident(segment)) if segment != "as" => {
                    written.push(segment.clone());
                    self.at += 1;
                    if self.kind(self.at) != Some(&Kind::PathSep) {
                        break;
                    }
                    self.at += 1;
                }
                Some(Kind::Open) => return self.use_group(&written),
                Some(Kind::Star) => {
                    self.at += 1;
                    return self.used(line, written, None);
                }
                _ => break,
            }
        }
        if written.last().is_some_and(|s| s == "self") {
            written.pop();
        }
        let mut name = written.last().cloned();
        if self.kind(self.at) == Some(&Kind::Ident("as".into())) {
            name = match self.kind(self.at + 1) {
                Some(Kind::Ident(alias)) => Some(alias.clone()),
                _ => None,
            };
            self.at += 2;
        }
        if let Some(name) = name {
            self.used(line, written, Some(name));
        }
    }

    fn use_group(&mut self, prefix: &[String]) {
        self.at += 1;
        while let Some(kind) = self.kind(self.at) {
            match kind {
                Kind::Close => {
                    self.at += 1;
                    return;
                }
                Kind::Comma => self.at += 1,
                _ => {
                    let before = self.at;
                    self.use_tree(prefix);
                    if self.at == before {
                        self.at += 1;
                    }
                }
            }
        }
    }

    /// Records a `use` of `written` as `name` (`None`: a glob), and mentions its path.
    fn used(&mut self, line: usize, written: Vec<String>, name: Option<String>) {
        let module = self.module();
        if let Some(target) = absolute(&module, &written) {
            let (map, key) = match name {
                Some(name) if name == "_" => (None, module.clone()),
                Some(name) => {
                    (Some(&mut self.krate.aliases), [module.clone(), vec![name]].concat())
                }
                None => (Some(&mut self.krate.globs), module.clone()),
            };
            if let Some(map) = map {
                map.entry(key).or_default().insert(target);
            }
        }
        self.krate.mentions.push(Mention { file: self.file.into(), line, module, written });
    }
}
