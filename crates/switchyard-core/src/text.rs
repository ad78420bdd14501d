//! Strings that come from outside (a client's model name, a field it sent, an upstream's
//! words) on their way into the request log, traces and notifications: what a model name may
//! be, and the one bound every logged string goes through.
//!
//! Invariant: a string that went through [`bounded`] is at most [`MAX_LOGGED`] bytes plus a
//! short suffix, holds no control characters, and says when it was cut and by how much, so a
//! 30 MiB field costs the log a few hundred bytes, not 30 MiB a record.

use std::borrow::Cow;
use std::fmt::Write as _;

/// The longest model name a client may ask for. Real names are far shorter: the longest in
/// OpenRouter's list is under 100 bytes.
pub const MAX_MODEL_NAME: usize = 256;

/// The most bytes of one outside string the request log, a trace or a notification keeps.
pub const MAX_LOGGED: usize = 256;

/// Why a model name was refused; the message names the field and what is allowed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModelNameError {
    #[error("`model` is empty: name a combo, an alias or `provider/model`")]
    Empty,
    #[error("`model` is {0} bytes long; at most {MAX_MODEL_NAME} bytes are allowed")]
    TooLong(usize),
    #[error(
        "`model` contains {0:?}, which no model name has: use letters, digits and `- _ . / : @ +`"
    )]
    Character(char),
}

/// A model name a client may ask for: 1 to [`MAX_MODEL_NAME`] bytes of ASCII letters, digits
/// and `- _ . / : @ +`, which covers every real naming scheme (OpenRouter's
/// `vendor/model:free`, Ollama's `llama3.1:8b`, Vertex's `model@2024-05-13`) and keeps out
/// what could change the meaning of a URL path, a header or a log line.
pub fn check_model_name(name: &str) -> Result<(), ModelNameError> {
    if name.is_empty() {
        return Err(ModelNameError::Empty);
    }
    if name.len() > MAX_MODEL_NAME {
        return Err(ModelNameError::TooLong(name.len()));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-_./:@+".contains(c);
    match name.chars().find(|&c| !allowed(c)) {
        Some(c) => Err(ModelNameError::Character(c)),
        None => Ok(()),
    }
}

/// `text` as the request log, traces and notifications keep it: at most [`MAX_LOGGED`]
/// bytes (cut at a character boundary, with how many bytes were left out), control
/// characters replaced by `\u{FFFD}`. Borrowed when nothing had to change, which is the
/// common case.
pub fn bounded(text: &str) -> Cow<'_, str> {
    let clean = |c: char| !c.is_control();
    if text.len() <= MAX_LOGGED && text.chars().all(clean) {
        return Cow::Borrowed(text);
    }
    let mut cut = MAX_LOGGED.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut out: String =
        text[..cut].chars().map(|c| if clean(c) { c } else { '\u{FFFD}' }).collect();
    if cut < text.len() {
        let _ = write!(out, "… ({} more bytes)", text.len() - cut);
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_model_names_are_accepted() {
        for name in [
            "gpt-4o",
            "anthropic/claude-sonnet-4.5",
            "meta-llama/llama-3.1-8b-instruct:free",
            "llama3.1:8b",
            "claude-3-5-sonnet@20240620",
            "ft:gpt-4o-mini:org+team:abc",
            "smart",
        ] {
            assert_eq!(check_model_name(name), Ok(()), "{name}");
        }
        assert_eq!(check_model_name(&"m".repeat(MAX_MODEL_NAME)), Ok(()));
    }

    #[test]
    fn names_that_are_empty_too_long_or_carry_other_characters_are_refused_naming_the_field() {
        assert_eq!(check_model_name(""), Err(ModelNameError::Empty));
        let long = "m".repeat(MAX_MODEL_NAME + 1);
        assert_eq!(check_model_name(&long), Err(ModelNameError::TooLong(257)));
        for (name, bad) in [
            ("../../upload/x?x=", '?'),
            ("gpt 4o", ' '),
            ("a\nb", '\n'),
            ("a%2Fb", '%'),
            ("a#b", '#'),
            ("é", 'é'),
        ] {
            let error = check_model_name(name).unwrap_err();
            assert_eq!(error, ModelNameError::Character(bad), "{name}");
            assert!(error.to_string().starts_with("`model`"), "{error}");
        }
    }

    #[test]
    fn a_short_clean_string_is_kept_as_it_is() {
        assert!(matches!(bounded("oa/gpt-4o"), Cow::Borrowed("oa/gpt-4o")));
    }

    #[test]
    fn a_long_string_is_cut_at_a_character_boundary_and_says_how_much_was_left_out() {
        let long = format!("{}é{}", "a".repeat(MAX_LOGGED - 1), "b".repeat(30 << 20));
        let kept = bounded(&long);
        assert!(kept.len() < MAX_LOGGED + 40, "{}", kept.len());
        assert!(kept.starts_with(&"a".repeat(MAX_LOGGED - 1)));
        assert!(kept.ends_with(&format!("… ({} more bytes)", long.len() - (MAX_LOGGED - 1))));
    }

    #[test]
    fn control_characters_are_replaced() {
        assert_eq!(bounded("a\nb\u{1b}[31m"), "a\u{FFFD}b\u{FFFD}[31m");
    }
}
