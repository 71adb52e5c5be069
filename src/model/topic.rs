//! When two wordings name the same topic, by text: the one normaliser the measurement of an
//! extractor (`extract::evaluate`) and the service's own keys (an add's effect id,
//! `store::effects`) share. Meaning is the embedder's business; this only forgives wording.

/// The topic as the same thing would be named again: case, spacing, hyphens, punctuation around
/// words, a leading article, plural endings and a verb's `-ing` form do not matter ("The
/// Killer-Whales!" and "killer whale" normalise alike, and so do "learn languages" and
/// "learning languages").
pub fn normalised(topic: &str) -> String {
    words(topic).join(" ")
}

/// Whether two wordings name the same topic: alike once normalised, or once their spaces are
/// gone too ("super man" and "superman", "killerwhales" and "killer whales").
pub fn same(a: &str, b: &str) -> bool {
    let (a, b) = (words(a), words(b));
    !a.is_empty() && (a == b || a.concat() == b.concat())
}

/// Whether the topic `inner` is named inside `outer`, word for word and in order ("green tea"
/// inside "green tea in the morning"), after normalising both.
pub fn contains(outer: &str, inner: &str) -> bool {
    let (outer, inner) = (words(outer), words(inner));
    !inner.is_empty() && outer.windows(inner.len()).any(|window| window == inner)
}

/// Whether two wordings name one view's topic: the same topic ([`same`]), or one named inside
/// the other ("tea" and "green tea in the morning"). What an extractor's find is scored against
/// a label by, and what two extractors' finds in one message are merged by.
pub fn overlaps(a: &str, b: &str) -> bool {
    same(a, b) || contains(a, b) || contains(b, a)
}

/// The normalised words: lower case, hyphens as spaces, punctuation around each word dropped,
/// a leading article left out, each word's plural ending read as singular and reduced to its
/// [`stem`].
fn words(topic: &str) -> Vec<String> {
    let lowered = topic.to_lowercase().replace(['-', '_', '/'], " ");
    let mut words: Vec<String> = lowered
        .split_whitespace()
        .map(|word| word.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|word| !word.is_empty())
        .map(singular)
        .collect();
    if words.len() > 1 && ["a", "an", "the"].contains(&words[0].as_str()) {
        words.remove(0);
    }
    words.into_iter().map(|word| stem(&word)).collect()
}

/// A word as its bare verb and its `-ing` form both reduce to it. A topic named by an activity
/// comes in either ("I like to learn languages", "learning languages is fun"), and the same
/// person names it both ways; the spelling rules of `-ing` (`take` → `taking`, `nap` →
/// `napping`, `lie` → `lying`) are undone by reducing both sides alike: an `-ing` dropped
/// (when a vowel is left before it), then a final `e` (from three letters on), then a doubled
/// final consonant, with `ie` read as `y`. A key to compare, never shown: a few unrelated
/// words share one ("plane" and "plan"), which costs nothing where only one person's topics
/// are compared.
fn stem(word: &str) -> String {
    let mut stem = word.to_string();
    if let Some(base) = word.strip_suffix("ing")
        && base.chars().count() >= 2
        && base.contains(['a', 'e', 'i', 'o', 'u', 'y'])
    {
        stem = base.to_string();
    }
    if let Some(base) = stem.strip_suffix("ie") {
        stem = format!("{base}y");
    }
    if stem.chars().count() >= 3 && stem.ends_with('e') {
        stem.pop();
    }
    let chars: Vec<char> = stem.chars().collect();
    if let [.., a, b] = chars[..]
        && a == b
        && a.is_ascii_alphabetic()
        && !"aeiou".contains(a)
    {
        stem.pop();
    }
    stem
}

/// A word's plural ending read as singular: `ies` → `y`, a final `s` (not `ss`, `us`, `is`)
/// dropped from words of four letters or more.
fn singular(word: &str) -> String {
    if let Some(stem) = word.strip_suffix("ies").filter(|stem| stem.len() > 1) {
        return format!("{stem}y");
    }
    if word.chars().count() > 3
        && word.ends_with('s')
        && !(word.ends_with("ss") || word.ends_with("us") || word.ends_with("is"))
    {
        return word[..word.len() - 1].to_string();
    }
    word.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wordings_of_one_topic_normalise_alike() {
        let table = [
            ("case and spacing", "Green  Tea", "green tea"),
            ("punctuation around words", "  green tea! ", "green tea"),
            ("hyphens", "sci-fi", "sci fi"),
            ("a leading article", "the ocean", "ocean"),
            ("plural -s", "cats", "cat"),
            ("plural -ies", "puppies", "puppy"),
            ("both", "The Killer-Whales", "killer whale"),
            (
                "a verb's -ing form",
                "learning languages",
                "learn languages",
            ),
            ("-ing after a final e", "taking a break", "take a break"),
            ("-ing after a doubled consonant", "napping", "nap"),
            ("-ing after ie", "lying in", "lie in"),
            (
                "every word",
                "taking a break and napping",
                "take a break and nap",
            ),
            (
                "a word that ends in -ing anyway",
                "Morning walks",
                "morning walk",
            ),
        ];
        for (case, a, b) in table {
            assert_eq!(normalised(a), normalised(b), "{case}");
            assert!(same(a, b), "{case}");
        }
    }

    #[test]
    fn spacing_inside_a_word_is_forgiven_but_other_words_are_not() {
        assert!(same("super man", "superman"));
        assert!(same("killerwhales", "killer whales"));
        for (a, b) in [
            ("tea", "coffee"),
            ("green tea", "black tea"),
            ("the", "a"),
            ("glass", "gla"),
            ("bus", "bu"),
            ("", ""),
            ("thing", "th"),
            ("cooking", "cookie"),
            ("swimming", "swimmer"),
        ] {
            assert!(!same(a, b), "{a:?} / {b:?}");
        }
        assert!(!normalised("the").is_empty(), "an article alone is a word");
        assert!(same("The", "the"));
    }

    #[test]
    fn a_topic_inside_another_is_found_word_for_word() {
        assert!(contains("green tea in the morning", "Green Teas"));
        assert!(contains("a long train ride", "long train rides"));
        assert!(!contains("green teapot", "green tea"));
    }
}
