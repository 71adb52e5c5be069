//! The category an opinion is filed under (culinary, musical, nature, …), from keywords in
//! its topic and sentence: the store's own fallback is "philosophical". Apart from the topic
//! readers because it judges nothing about what is liked, only where it is shelved.

/// A category from keywords; the store falls back to "philosophical" for anything else.
pub fn category_for(text: &str) -> &'static str {
    KeywordIndex::new(text).category_with("")
}

/// The category of a topic said in a sentence: [`category_for`] of `"{name} {lowered}"`,
/// with what the sentence holds read once per sentence and kept: a long sentence of many
/// clauses makes an opinion per clause, and reading the whole sentence for each made the
/// extractor quadratic in the sentence's length.
pub(super) fn category_in_sentence(name: &str, lowered: &str) -> &'static str {
    thread_local! {
        static LAST: std::cell::RefCell<Option<(String, std::rc::Rc<KeywordIndex>)>> =
            const { std::cell::RefCell::new(None) };
    }
    let index = LAST.with(|last| {
        let mut last = last.borrow_mut();
        match last.as_ref() {
            Some((text, index)) if text == lowered => index.clone(),
            _ => {
                let index = std::rc::Rc::new(KeywordIndex::new(lowered));
                *last = Some((lowered.to_string(), index.clone()));
                index
            }
        }
    });
    index.category_with(name)
}

/// The words of a text, and the longer keywords it holds, for [`category_for`]'s table.
struct KeywordIndex {
    text: String,
    /// Every word, and every prefix of a word at most 3 shorter (a keyword matches a word
    /// it begins, within 3 letters: "cook" in "cooking").
    prefixes: std::collections::HashSet<String>,
}

impl KeywordIndex {
    fn new(text: &str) -> KeywordIndex {
        let mut prefixes = std::collections::HashSet::new();
        for word in text
            .split(|c: char| !c.is_alphanumeric() && c != '-')
            .filter(|w| !w.is_empty())
        {
            for (end, _) in word
                .char_indices()
                .skip(1)
                .chain(std::iter::once((word.len(), ' ')))
            {
                if word.len() - end <= 3 {
                    prefixes.insert(word[..end].to_string());
                }
            }
        }
        KeywordIndex {
            text: text.to_string(),
            prefixes,
        }
    }

    /// The first category of the table with a keyword in `"{name} {text}"` (the whole text
    /// when `name` is empty), exactly as a scan of that joined text finds it.
    fn category_with(&self, name: &str) -> &'static str {
        let named = (!name.is_empty()).then(|| KeywordIndex::new(name));
        for (category, keywords) in CATEGORY_KEYWORDS {
            for keyword in *keywords {
                let hit = if keyword.contains(' ') {
                    self.text.contains(keyword)
                        || (!name.is_empty() && {
                            // A match in the name, or across the join into the text.
                            let mut head_end = keyword.len().min(self.text.len());
                            while !self.text.is_char_boundary(head_end) {
                                head_end += 1;
                            }
                            format!("{name} {}", &self.text[..head_end]).contains(keyword)
                        })
                } else {
                    self.prefixes.contains(*keyword)
                        || named
                            .as_ref()
                            .is_some_and(|named| named.prefixes.contains(*keyword))
                };
                if hit {
                    return category;
                }
            }
        }
        "philosophical"
    }
}

const CATEGORY_KEYWORDS: &[(&str, &[&str])] = {
    const TABLE: &[(&str, &[&str])] = &[
        (
            "culinary",
            &[
                "food",
                "tea",
                "coffee",
                "cilantro",
                "pizza",
                "cook",
                "bread",
                "cheese",
                "chocolate",
                "wine",
                "beer",
                "soup",
                "spicy",
                "sushi",
                "pineapple",
                "breakfast",
                "dinner",
                "lunch",
                "dessert",
                "cake",
                "fruit",
                "vegetable",
                "meal",
                "recipe",
                "taste",
                "flavor",
                "flavour",
                "eat",
                "mushroom",
                "garlic",
                "curry",
                "pasta",
                "noodle",
                "olive",
                "coriander",
                "espresso",
                "latte",
                "kimchi",
                "tofu",
                "baking",
                "salt",
            ],
        ),
        (
            "musical",
            &[
                "music",
                "jazz",
                "song",
                "band",
                "album",
                "opera",
                "piano",
                "guitar",
                "symphony",
                "melody",
                "rock",
                "pop",
                "classical",
                "violin",
                "concert",
                "sing",
                "choir",
                "hip hop",
                "rap",
                "vinyl",
                "playlist",
                "bach",
                "mozart",
                "beatles",
            ],
        ),
        (
            "literary",
            &[
                "book",
                "novel",
                "poem",
                "poetry",
                "author",
                "story",
                "stories",
                "reading",
                "literature",
                "fiction",
                "prose",
                "writer",
                "library",
                "tolstoy",
                "austen",
                "haiku",
                "shakespeare",
                "sci-fi",
                "fantasy",
                "memoir",
                "essay",
            ],
        ),
        (
            "technological",
            &[
                "code",
                "coding",
                "rust",
                "python",
                "javascript",
                "software",
                "computer",
                "programming",
                "ai",
                "tech",
                "internet",
                "app",
                "phone",
                "linux",
                "keyboard",
                "robot",
                "algorithm",
                "typescript",
                "tabs",
                "spaces",
                "vim",
                "emacs",
                "database",
                "smartphone",
                "gadget",
            ],
        ),
        (
            "nature",
            &[
                "rain", "forest", "ocean", "sea", "cat", "dog", "animal", "bird", "tree", "flower",
                "mountain", "river", "garden", "snow", "autumn", "winter", "summer", "spring",
                "season", "sunset", "storm", "thunder", "star", "moon", "weather", "owl", "whale",
                "moss", "fog", "beach", "hiking",
            ],
        ),
        (
            "ethical",
            &[
                "honesty",
                "lying",
                "lie",
                "cruelty",
                "justice",
                "kindness",
                "fairness",
                "cheating",
                "loyalty",
                "truth",
                "moral",
                "ethic",
                "greed",
                "generosity",
                "forgiveness",
                "rudeness",
                "empathy",
                "privacy",
                "violence",
            ],
        ),
        (
            "aesthetic",
            &[
                "art",
                "painting",
                "design",
                "color",
                "colour",
                "architecture",
                "beauty",
                "fashion",
                "style",
                "font",
                "typography",
                "minimalism",
                "gothic",
                "brutalism",
                "sculpture",
                "photography",
                "aesthetic",
                "light",
                "candle",
            ],
        ),
        (
            "entertainment",
            &[
                "movie",
                "film",
                "game",
                "show",
                "tv",
                "television",
                "series",
                "anime",
                "cinema",
                "sitcom",
                "video game",
                "chess",
                "puzzle",
                "sport",
                "football",
                "soccer",
                "reality",
                "comedy",
                "horror",
                "netflix",
            ],
        ),
        (
            "social",
            &[
                "people",
                "party",
                "parties",
                "conversation",
                "friend",
                "crowd",
                "small talk",
                "gossip",
                "meeting",
                "community",
                "company",
                "chat",
                "smalltalk",
                "strangers",
                "networking",
            ],
        ),
        (
            "intellectual",
            &[
                "math",
                "science",
                "physics",
                "history",
                "learning",
                "philosophy",
                "logic",
                "chemistry",
                "biology",
                "astronomy",
                "language",
                "grammar",
                "etymology",
                "puzzles",
                "curiosity",
                "knowledge",
                "proof",
                "theory",
                "debate",
                "latin",
            ],
        ),
        (
            "personal",
            &[
                "morning", "sleep", "nap", "walk", "routine", "quiet", "solitude", "silence",
                "travel", "home", "journal", "exercise", "mornings", "nights", "weekend",
            ],
        ),
    ];
    TABLE
};
