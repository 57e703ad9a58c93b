//! The source as the layer test reads it: comments and literals blanked out, the rest cut
//! into tokens, and the uses (`crate::`, `super::`, `self::` paths) found among them.

/// A word or punctuation of the source, and its line.
pub(super) struct Token {
    pub(super) text: String,
    pub(super) line: usize,
}

/// A use: the absolute path it starts with (one or two names), and its line.
pub(super) struct Use {
    pub(super) path: Vec<String>,
    pub(super) line: usize,
}

/// The uses in a file of module `at`.
pub(super) fn uses(text: &str, at: &[String]) -> Vec<Use> {
    let tokens = tokens(&clean(text));
    let mut found = Vec::new();
    // The inline modules the position is in, with the brace depth inside each.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let text_at = |i: usize| tokens.get(i).map_or("", |t: &Token| t.text.as_str());
    let mut i = 0;
    while i < tokens.len() {
        match text_at(i) {
            "{" => depth += 1,
            "}" => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            "mod" if text_at(i + 2) == "{" => {
                inline.push((text_at(i + 1).to_owned(), depth + 1));
            }
            start @ ("crate" | "super" | "self")
                if text_at(i + 1) == "::" && (i == 0 || text_at(i - 1) != "::") =>
            {
                let mut base: Vec<String> = at.to_vec();
                base.extend(inline.iter().map(|(name, _)| name.clone()));
                if start == "crate" {
                    base.clear();
                }
                let mut j = i;
                if start == "super" {
                    while text_at(j) == "super" && text_at(j + 1) == "::" {
                        base.pop();
                        j += 2;
                    }
                } else {
                    j += 2;
                }
                for (tail, line) in tails(&tokens, j) {
                    let mut path = base.clone();
                    path.extend(tail);
                    path.truncate(2);
                    if !path.is_empty() {
                        found.push(Use { path, line });
                    }
                }
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// The paths that start at token `i` (just after a `::`): one name and the next, or each
/// item of a `{ ... }` group.
fn tails(tokens: &[Token], i: usize) -> Vec<(Vec<String>, usize)> {
    let text_at = |i: usize| tokens.get(i).map_or("", |t: &Token| t.text.as_str());
    let is_name = |t: &str| t.starts_with(|c: char| c.is_alphabetic() || c == '_');
    let path_at = |i: usize| {
        let mut tail = vec![text_at(i).to_owned()];
        if text_at(i + 1) == "::" && is_name(text_at(i + 2)) {
            tail.push(text_at(i + 2).to_owned());
        }
        (tail, tokens[i].line)
    };
    if is_name(text_at(i)) {
        return vec![path_at(i)];
    }
    if text_at(i) != "{" {
        return Vec::new();
    }
    let mut found = Vec::new();
    let (mut depth, mut item_start, mut j) = (1, true, i + 1);
    while j < tokens.len() && depth > 0 {
        match text_at(j) {
            "{" => depth += 1,
            "}" => depth -= 1,
            "," if depth == 1 => item_start = true,
            t if depth == 1 && item_start && is_name(t) => {
                if t != "self" {
                    found.push(path_at(j));
                }
                item_start = false;
            }
            _ => item_start = false,
        }
        j += 1;
    }
    found
}

/// Names, `::`, and every other character as a token of its own, with their lines.
pub(super) fn tokens(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let text = chars[start..i].iter().collect();
            tokens.push(Token { text, line });
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push(Token {
                text: "::".into(),
                line,
            });
            i += 2;
        } else {
            tokens.push(Token {
                text: c.to_string(),
                line,
            });
            i += 1;
        }
    }
    tokens
}

/// `text` with comments, strings and characters blanked (lines kept).
pub(super) fn clean(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, run: &[char]| {
        out.extend(run.iter().map(|&c| if c == '\n' { '\n' } else { ' ' }));
    };
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let after_name = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        let end = if c == '/' && at(i + 1) == '/' {
            (i..chars.len())
                .find(|&j| chars[j] == '\n')
                .unwrap_or(chars.len())
        } else if c == '/' && at(i + 1) == '*' {
            let (mut depth, mut j) = (0, i);
            loop {
                if at(j) == '/' && at(j + 1) == '*' {
                    depth += 1;
                    j += 2;
                } else if at(j) == '*' && at(j + 1) == '/' {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break j;
                    }
                } else if j >= chars.len() {
                    break j;
                } else {
                    j += 1;
                }
            }
        } else if !after_name && let Some(end) = raw_string(&chars, i) {
            end
        } else if c == '"' {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '"' {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            j + 1
        } else if c == '\'' && at(i + 1) == '\\' {
            (i + 2..chars.len())
                .find(|&j| chars[j] == '\'')
                .map_or(chars.len(), |j| j + 1)
        } else if c == '\'' && at(i + 2) == '\'' {
            i + 3
        } else {
            out.push(c);
            i += 1;
            continue;
        };
        let end = end.min(chars.len());
        blank(&mut out, &chars[i..end]);
        i = end;
    }
    out
}

/// The end of a raw string (`r"..."`, `r#"..."#`, `br"..."`) starting at `i`, if one does.
fn raw_string(chars: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if chars.get(j) == Some(&'b') {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = chars[j..].iter().take_while(|&&c| c == '#').count();
    j += hashes;
    if chars.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < chars.len() {
        if chars[j] == '"'
            && chars[j + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == '#')
                .count()
                == hashes
        {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(chars.len())
}
