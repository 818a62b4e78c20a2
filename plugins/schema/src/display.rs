//! A schema's one-line display template: text with `{field}` where a field's value goes, and
//! `{{` and `}}` for braces.

/// A parsed template: literal text and fields by their index in the schema's field list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Display(pub Vec<Part>);

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    Text(String),
    Field(usize),
}

/// Longest template read.
pub const MAX_TEMPLATE: usize = 1024;

impl Display {
    /// Parses `template` against the schema's field names. An error gives the byte offset in
    /// the template and what was wrong.
    pub fn parse(template: &str, fields: &[&str]) -> Result<Display, (usize, String)> {
        if template.len() > MAX_TEMPLATE {
            return Err((
                0,
                format!("a display template is at most {MAX_TEMPLATE} bytes"),
            ));
        }
        let mut parts = Vec::new();
        let mut text = String::new();
        let mut rest = template;
        while let Some(c) = rest.chars().next() {
            let at = template.len() - rest.len();
            if rest.starts_with("{{") || rest.starts_with("}}") {
                text.push(c);
                rest = &rest[2..];
            } else if c == '{' {
                let Some(end) = rest.find('}') else {
                    return Err((at, "'{' is not closed: write '{{' for a brace".into()));
                };
                let name = &rest[1..end];
                let Some(index) = fields.iter().position(|f| *f == name) else {
                    return Err((at, format!("{{{name}}} names no field of the event")));
                };
                if !text.is_empty() {
                    parts.push(Part::Text(std::mem::take(&mut text)));
                }
                parts.push(Part::Field(index));
                rest = &rest[end + 1..];
            } else if c == '}' {
                return Err((at, "'}' closes nothing: write '}}' for a brace".into()));
            } else {
                text.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
        if !text.is_empty() {
            parts.push(Part::Text(text));
        }
        Ok(Display(parts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_braces_and_errors() {
        let d = Display::parse("fd {fd} at {{{off}}}", &["off", "fd"]).unwrap();
        assert_eq!(
            d.0,
            vec![
                Part::Text("fd ".into()),
                Part::Field(1),
                Part::Text(" at {".into()),
                Part::Field(0),
                Part::Text("}".into()),
            ]
        );
        assert_eq!(Display::parse("x {nope}", &["fd"]).unwrap_err().0, 2);
        assert_eq!(Display::parse("x {fd", &["fd"]).unwrap_err().0, 2);
        assert_eq!(Display::parse("é }", &["fd"]).unwrap_err().0, 3);
    }
}
