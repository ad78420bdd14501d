//! Aliases: model names other tools send on their own (`claude-haiku-4-5-20251001`), mapped
//! onto a route this router knows (a combo or `provider/model`).
//!
//! A pattern is literal text where `*` (the only wildcard) stands for any run of characters,
//! the empty run included. Matching is case-sensitive, like the model names upstreams accept and
//! like combo names: `claude-*` does not catch `Claude-3`, so an alias never catches a name its
//! author did not write down.
//!
//! When several patterns match one name, the most specific decides, and the choice never
//! depends on anything but the patterns:
//! 1. more literal characters (what is not `*`) wins, so a pattern without `*` equal to the name
//!    beats every glob that matches it, and `claude-*haiku*` beats `claude-*`;
//! 2. then fewer wildcards (`a*b` beats `a*b*` on `ab`);
//! 3. then the pattern written first.
//!
//! Patterns are compiled once, when the routing table is built; a lookup only compares text.

/// One compiled pattern: its literal pieces, which a match finds in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    text: String,
    /// The text split at each `*`, runs of `*` counting as one: `a*b` is `["a", "b"]`, `*a` is
    /// `["", "a"]`. Never empty (`split` yields at least one piece); one piece means no
    /// wildcard.
    pieces: Vec<String>,
    /// Characters that are not `*`: the specificity that ranks matching patterns.
    literal_chars: usize,
}

impl Pattern {
    pub fn new(text: &str) -> Self {
        // Runs of `*` mean one `*`: `a**b` is `a*b`.
        let mut collapsed = String::with_capacity(text.len());
        for c in text.chars() {
            if !(c == '*' && collapsed.ends_with('*')) {
                collapsed.push(c);
            }
        }
        // A leading or trailing `*` leaves an empty first or last piece: "anything before",
        // "anything after".
        let pieces = collapsed.split('*').map(str::to_owned).collect();
        let literal_chars = text.chars().filter(|&c| c != '*').count();
        Self { text: text.to_owned(), pieces, literal_chars }
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Has no wildcard: it matches exactly one name, itself.
    pub fn is_exact(&self) -> bool {
        self.pieces.len() == 1
    }

    /// Made of wildcards only: it matches every name.
    pub fn is_catch_all(&self) -> bool {
        self.literal_chars == 0 && !self.is_exact()
    }

    /// The literal text every matching name starts with (all of it for an exact pattern).
    pub fn prefix(&self) -> &str {
        &self.pieces[0]
    }

    fn wildcards(&self) -> usize {
        self.pieces.len() - 1
    }

    /// Whether `name` is one of the names the pattern stands for.
    ///
    /// The first piece must start the name and the last must end it; the pieces between are
    /// found left to right, each at its earliest place. Taking the earliest place is never
    /// wrong: it leaves the most room for the pieces after it. Bytes are compared, which is
    /// exact for UTF-8: a piece can only match where a character starts.
    pub fn matches(&self, name: &str) -> bool {
        let (first, rest) = self.pieces.split_first().expect("a pattern has a first piece");
        let Some((last, middle)) = rest.split_last() else {
            return name == first;
        };
        let Some(mut name) = name.strip_prefix(first.as_str()) else { return false };
        for piece in middle {
            match name.find(piece.as_str()) {
                Some(at) => name = &name[at + piece.len()..],
                None => return false,
            }
        }
        name.ends_with(last.as_str())
    }

    /// Higher ranks first: more literal characters, then fewer wildcards.
    fn rank(&self) -> (usize, std::cmp::Reverse<usize>) {
        (self.literal_chars, std::cmp::Reverse(self.wildcards()))
    }
}

/// One alias: a pattern and where the names it matches go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alias {
    pub pattern: Pattern,
    /// A combo name or `provider/model`; never another alias, so a lookup is one step.
    pub to: String,
}

/// Every alias, in the order written (the last tie-break).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AliasTable {
    aliases: Vec<Alias>,
}

impl AliasTable {
    /// Compiles `(pattern, to)` pairs, in the order written.
    pub fn new<'a>(aliases: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let aliases = aliases
            .into_iter()
            .map(|(pattern, to)| Alias { pattern: Pattern::new(pattern), to: to.to_owned() })
            .collect();
        Self { aliases }
    }

    pub fn is_empty(&self) -> bool {
        self.aliases.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Alias> {
        self.aliases.iter()
    }

    /// The alias that decides where `name` goes: the most specific matching pattern (see the
    /// module's ranking), or `None` when none matches.
    pub fn lookup(&self, name: &str) -> Option<&Alias> {
        let mut best: Option<&Alias> = None;
        for alias in self.aliases.iter().filter(|a| a.pattern.matches(name)) {
            // Strictly greater: on a tie the one written first stays.
            if best.is_none_or(|b| alias.pattern.rank() > b.pattern.rank()) {
                best = Some(alias);
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(aliases: &[(&'static str, &'static str)]) -> AliasTable {
        AliasTable::new(aliases.iter().copied())
    }

    fn to<'t>(table: &'t AliasTable, name: &str) -> Option<&'t str> {
        table.lookup(name).map(|a| a.to.as_str())
    }

    #[test]
    fn a_pattern_without_a_wildcard_matches_only_itself() {
        let p = Pattern::new("claude-haiku");
        assert!(p.is_exact());
        assert!(p.matches("claude-haiku"));
        assert!(!p.matches("claude-haiku-4"));
        assert!(!p.matches("x-claude-haiku"));
        assert!(!p.matches(""));
    }

    #[test]
    fn a_star_matches_any_run_of_characters_including_none() {
        let p = Pattern::new("claude-*haiku*");
        assert!(p.matches("claude-haiku"));
        assert!(p.matches("claude-3-5-haiku-20241022"));
        assert!(p.matches("claude-haiku-4-5-20251001"));
        assert!(!p.matches("claude-sonnet-4-5"));
        assert!(!p.matches("gpt-haiku"));
    }

    #[test]
    fn a_match_needs_the_first_piece_at_the_start_and_the_last_at_the_end() {
        let p = Pattern::new("a*b");
        assert!(p.matches("ab"));
        assert!(p.matches("axxb"));
        assert!(p.matches("abab"));
        assert!(!p.matches("abc"));
        assert!(!p.matches("cab"));
        // The first and last pieces may not share characters.
        assert!(!Pattern::new("ab*ba").matches("aba"));
        assert!(Pattern::new("ab*ba").matches("abba"));
    }

    #[test]
    fn middle_pieces_are_found_in_order() {
        let p = Pattern::new("*x*y*");
        assert!(p.matches("xy"));
        assert!(p.matches("1x2y3"));
        assert!(!p.matches("yx"));
    }

    #[test]
    fn runs_of_stars_mean_one_star() {
        assert_eq!(Pattern::new("a**b").pieces, Pattern::new("a*b").pieces);
        assert_eq!(Pattern::new("a***").pieces, Pattern::new("a*").pieces);
        assert_eq!(Pattern::new("**a").pieces, Pattern::new("*a").pieces);
        assert!(Pattern::new("a**b").matches("ab"));
        assert_eq!(Pattern::new("a**b").wildcards(), 1);
    }

    #[test]
    fn only_stars_is_a_catch_all() {
        assert!(Pattern::new("*").is_catch_all());
        assert!(Pattern::new("**").matches(""));
        assert!(!Pattern::new("a*").is_catch_all());
        assert!(!Pattern::new("").is_catch_all());
    }

    #[test]
    fn matching_is_case_sensitive() {
        assert!(!Pattern::new("claude-*").matches("Claude-3"));
        assert!(!Pattern::new("gpt-4o").matches("GPT-4o"));
    }

    #[test]
    fn non_ascii_names_match_by_character() {
        let p = Pattern::new("modèle-*-é");
        assert!(p.matches("modèle-ü-é"));
        assert!(!p.matches("modele-ü-é"));
        assert_eq!(p.literal_chars, 9);
    }

    #[test]
    fn the_prefix_is_the_literal_text_before_the_first_star() {
        assert_eq!(Pattern::new("oa/gpt-*").prefix(), "oa/gpt-");
        assert_eq!(Pattern::new("*-mini").prefix(), "");
        assert_eq!(Pattern::new("exact").prefix(), "exact");
    }

    #[test]
    fn an_exact_alias_beats_every_glob_that_matches_the_name() {
        let t =
            table(&[("claude-*", "broad"), ("claude-haiku*", "glob"), ("claude-haiku", "exact")]);
        assert_eq!(to(&t, "claude-haiku"), Some("exact"));
        assert_eq!(to(&t, "claude-haiku-4"), Some("glob"));
    }

    #[test]
    fn the_longer_glob_beats_the_shorter_whatever_the_order_written() {
        let t = table(&[("claude-*", "smart"), ("claude-*haiku*", "fast")]);
        assert_eq!(to(&t, "claude-haiku-4-5-20251001"), Some("fast"));
        assert_eq!(to(&t, "claude-sonnet-4-5-20250929"), Some("smart"));
        let reversed = table(&[("claude-*haiku*", "fast"), ("claude-*", "smart")]);
        assert_eq!(to(&reversed, "claude-haiku-4-5-20251001"), Some("fast"));
    }

    #[test]
    fn length_counts_characters_not_wildcards() {
        // Both patterns have seven literal characters; the star does not make one longer.
        let t = table(&[("claude*", "one"), ("*claude", "two"), ("claud*e", "three")]);
        assert_eq!(to(&t, "claude"), Some("one"));
    }

    #[test]
    fn on_equal_length_fewer_wildcards_win() {
        let t = table(&[("*gpt*mini*", "three"), ("gpt*mini*", "two")]);
        assert_eq!(to(&t, "gpt-4o-mini"), Some("two"));
    }

    #[test]
    fn on_equal_length_and_wildcards_the_alias_written_first_wins() {
        // Five literal characters and one star each.
        let t = table(&[("*-mini", "first"), ("gpt-m*", "second")]);
        assert_eq!(to(&t, "gpt-mini"), Some("first"));
        let t = table(&[("gpt-m*", "second"), ("*-mini", "first")]);
        assert_eq!(to(&t, "gpt-mini"), Some("second"));
    }

    #[test]
    fn a_name_no_pattern_matches_has_no_alias() {
        let t = table(&[("claude-*", "smart")]);
        assert_eq!(to(&t, "gpt-4o"), None);
        assert_eq!(to(&AliasTable::default(), "anything"), None);
    }
}
