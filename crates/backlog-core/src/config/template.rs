//! `{column}` placeholders in `handler.url` and `handler.body`: a text written once in
//! the schedule file, filled from each record.
//!
//! A placeholder is `{name}` where the name is a column's (letters, digits, `_`); any
//! other brace is text (`{"id": {id}}` has one placeholder), and `{{` is a brace.
//! Filling never fails on a value: how a value is written (percent-encoded in a path,
//! as JSON in a body) is the caller's, through the closure it passes.

/// A text with placeholders, parsed once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pieces: Vec<Piece>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Column(String),
}

impl Template {
    /// Reads `text`'s placeholders.
    pub fn parse(text: &str) -> Template {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            literal.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            if let Some(more) = after.strip_prefix('{') {
                literal.push('{');
                rest = more;
                continue;
            }
            let name_len = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            if name_len > 0 && after[name_len..].starts_with('}') {
                if !literal.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut literal)));
                }
                pieces.push(Piece::Column(after[..name_len].to_string()));
                rest = &after[name_len + 1..];
            } else {
                literal.push('{');
                rest = after;
            }
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            pieces.push(Piece::Text(literal));
        }
        Template { pieces }
    }

    /// The columns it names, in order, each once.
    pub fn columns(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for piece in &self.pieces {
            if let Piece::Column(name) = piece
                && !names.contains(&name.as_str())
            {
                names.push(name);
            }
        }
        names
    }

    /// The text before its first placeholder (all of it, without one).
    pub fn prefix(&self) -> &str {
        match self.pieces.first() {
            Some(Piece::Text(t)) => t,
            _ => "",
        }
    }

    /// The text with each placeholder replaced by what `fill` appends for its column
    /// to the text written so far, which it sees (a URL's caller encodes a value in
    /// the path, and checks one in the host).
    pub fn fill(&self, mut fill: impl FnMut(&str, &mut String)) -> String {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Column(name) => fill(name, &mut out),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_names_in_braces_and_other_braces_are_text() {
        let t = Template::parse(r#"{"order": {id}, "n": {{id}}, "x": {a b}, {id}}"#);
        assert_eq!(t.columns(), vec!["id"]);
        let filled = t.fill(|name, out| out.push_str(&format!("<{name}>")));
        assert_eq!(filled, r#"{"order": <id>, "n": {id}}, "x": {a b}, <id>}"#);
        let url = Template::parse("https://h.example/orders/{id}/{shop_id}?x={id}");
        assert_eq!(url.columns(), vec!["id", "shop_id"]);
        assert_eq!(url.prefix(), "https://h.example/orders/");
        assert_eq!(Template::parse("{endpoint}").prefix(), "");
        assert_eq!(Template::parse("{").fill(|_, _| {}), "{");
        assert_eq!(Template::parse("{}").columns(), Vec::<&str>::new());
    }
}
