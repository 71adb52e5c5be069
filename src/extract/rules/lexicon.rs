//! The words a judgement's stance is read from: evaluative adjectives and nouns ("delightful",
//! "a nightmare"), the modifiers that may stand before them ("a real", "pure", "kind of",
//! "wonderfully"), and comparatives ("warmer", "duller").
//!
//! The lists are general English, not phrases lifted from the labelled sets: a rule that only
//! knows the words of its tests does not generalise. Words whose stance depends on the thing
//! judged ("addictive", "cheap", "dry", "hard", "broken") are left out on purpose: a wrong
//! stance is worse than none.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use crate::model::Stance;

#[rustfmt::skip]
const POSITIVE: &[&str] = &[
    // Praise.
    "great", "wonderful", "beautiful", "amazing", "awesome", "brilliant", "fantastic",
    "excellent", "good", "nice", "fine", "decent", "solid", "superb", "terrific", "fabulous",
    "fab", "marvelous", "marvellous", "magnificent", "splendid", "glorious", "incredible",
    "phenomenal", "outstanding", "exceptional", "extraordinary", "remarkable", "impressive",
    "spectacular", "stellar", "sublime", "exquisite", "flawless", "impeccable", "perfect",
    "ideal", "unmatched", "unbeatable", "unrivaled", "unrivalled", "masterful", "superior",
    "best", "greatest", "better", "finest", "nicest", "loveliest", "sweetest", "happiest",
    "dearest", "coziest", "cosiest", "prettiest", "purest", "funniest", "kindest", "cutest",
    // Beauty and charm.
    "lovely", "gorgeous", "stunning", "breathtaking", "dazzling", "radiant", "elegant",
    "graceful", "majestic", "picturesque", "scenic", "charming", "delightful", "enchanting",
    "captivating", "mesmerizing", "mesmerising", "magical", "dreamy", "romantic", "whimsical",
    "adorable", "cute", "sweet", "handsome", "stylish", "chic", "classy", "sleek", "refined",
    "nostalgic",
    "sophisticated", "poetic", "lyrical", "soulful", "timeless", "iconic", "legendary",
    "classic", "enchanted", "heavenly", "divine", "idyllic", "wondrous",
    // Interest and fun.
    "fun", "funny", "hilarious", "amusing", "entertaining", "enjoyable", "fascinating",
    "interesting", "intriguing", "engaging", "absorbing", "gripping", "riveting", "compelling",
    "thrilling", "exciting", "exhilarating", "electrifying", "thought-provoking", "witty",
    "clever", "ingenious", "imaginative", "inventive", "creative", "original", "innovative",
    "insightful", "irresistible", "unforgettable", "cool", "neat", "rad", "dope", "lit", "fire", "bomb", "legend",
    "goated", "bussin", "epic", "elite", "top-tier", "s-tier", "peak", "underrated",
    "underappreciated", "undervalued", "underestimated", "overlooked", "slept-on", "unique",
    // Comfort and calm.
    "calming", "soothing", "relaxing", "restful", "peaceful", "serene", "tranquil", "calm",
    "cozy", "cosy", "snug", "comfy", "comfortable", "comforting", "welcoming", "inviting",
    "warm", "gentle", "mellow", "smooth", "meditative", "grounding", "healing", "therapeutic",
    "restorative", "refreshing", "invigorating", "energizing", "energising", "uplifting",
    "heartwarming", "wholesome", "cheerful", "joyful", "joyous", "happy", "blissful",
    "pleasant", "pleasing", "satisfying", "gratifying", "fulfilling", "rewarding", "worthwhile",
    "cathartic", "liberating", "freeing", "empowering", "inspiring", "inspirational",
    "motivating", "encouraging", "hopeful", "moving", "touching", "poignant",
    // Taste.
    "delicious", "tasty", "yummy", "scrumptious", "mouthwatering", "flavorful", "flavourful",
    "luscious", "decadent", "hearty", "nourishing", "nutritious", "healthy", "fresh",
    // Worth and virtue.
    "important", "essential", "vital", "crucial", "valuable", "invaluable", "priceless",
    "precious", "indispensable", "useful", "helpful", "handy", "practical", "convenient",
    "reliable", "worth", "worthy", "meaningful", "profound", "significant", "wise", "honest",
    "noble", "admirable", "brave", "courageous", "generous", "humble", "fair", "right",
    "ethical", "sustainable", "authentic", "genuine", "sincere", "beloved", "cherished",
    "treasured", "sacred", "genius", "vibrant", "lively", "colorful", "colourful", "catchy",
    "harmonious", "melodic", "groovy",
    // Nouns of praise ("X is a gem", "pure bliss").
    "gem", "treasure", "gift", "blessing", "godsend", "lifesaver", "life-saver", "game-changer",
    "gamechanger", "revelation", "masterpiece", "delight", "joy", "pleasure", "treat", "luxury",
    "bliss", "heaven", "paradise", "perfection", "magic", "win", "winner", "must", "must-have",
    "staple", "vibe", "banger", "art", "artform", "craft", "privilege", "comfort", "solace",
    "refuge", "sanctuary", "adventure", "thrill", "wonder", "miracle", "triumph",
    "delicacy", "feast", "balm", "tonic", "virtue", "underdog", "superpower", "highlight",
    "king", "queen", "champion", "hero", "goat", "keeper", "misunderstood", "unappreciated",
    "unsung", "go-to", "blast", "hoot",
];

#[rustfmt::skip]
const NEGATIVE: &[&str] = &[
    // Condemnation.
    "terrible", "awful", "horrible", "horrid", "dreadful", "atrocious", "abysmal", "appalling",
    "horrendous", "hideous", "ghastly", "dire", "woeful", "pathetic", "pitiful", "bad", "worse",
    "worst", "lousy", "subpar", "mediocre", "disappointing", "underwhelming", "lame", "weak",
    "feeble", "shoddy", "inferior", "wrong", "evil", "immoral", "unethical", "corrupt", "vile",
    "nasty", "disgraceful", "shameful", "offensive", "insulting", "degrading", "demeaning",
    "inhumane", "barbaric", "outrageous", "scandalous", "unacceptable", "inexcusable",
    "unforgivable", "unfair", "unjust", "cruel", "harmful", "toxic", "poisonous", "destructive",
    "damaging", "dangerous", "reckless", "irresponsible", "unhealthy", "trash", "trashy",
    "garbage", "rubbish", "crap", "crappy", "junk", "mid", "meh",
    // Boredom and pointlessness.
    "boring", "dull", "tedious", "tiresome", "monotonous", "repetitive", "dreary", "drab",
    "bleak", "bland", "tasteless", "insipid", "uninspired", "uninspiring", "lifeless",
    "soulless", "sterile", "clinical", "impersonal", "joyless", "pointless", "meaningless",
    "senseless", "mindless", "useless", "worthless", "unnecessary", "needless", "redundant",
    "overrated", "overhyped", "overblown", "overdone", "overused", "predictable", "formulaic",
    "derivative", "generic", "basic", "cliched", "clichéd", "cliché", "stale", "dated",
    "outdated", "obsolete", "silly", "stupid", "dumb", "idiotic", "ridiculous", "absurd",
    "laughable", "nonsensical",
    // Discomfort and strain.
    "stressful", "exhausting", "draining", "tiring", "nerve-wracking", "intimidating",
    "overwhelming", "confusing", "baffling", "convoluted", "bureaucratic", "frustrating",
    "infuriating", "maddening", "aggravating", "exasperating", "irritating", "annoying",
    "bothersome", "painful", "uncomfortable", "cramped", "claustrophobic", "stuffy", "muggy",
    "crowded", "overcrowded", "chaotic", "noisy", "loud", "cluttered", "scratchy", "itchy",
    "clunky", "clumsy", "awkward", "cringe", "cringey", "cringy", "cringeworthy",
    "embarrassing", "unbearable", "intolerable", "insufferable", "unwatchable", "unreadable",
    "unlistenable", "inedible", "undrinkable", "sluggish", "laggy", "buggy", "glitchy",
    "terrifying", "scary", "frightening", "horrifying", "creepy", "unsettling", "disturbing",
    "depressing", "miserable", "sad", "gloomy", "grim", "cold",
    // Taste and texture.
    "disgusting", "gross", "revolting", "repulsive", "repugnant", "nauseating", "sickening",
    "icky", "yucky", "foul", "rancid", "greasy", "soggy", "mushy", "slimy", "rubbery", "watery",
    "flavorless", "flavourless", "overcooked", "bitter",
    // Character.
    "pretentious", "pompous", "smug", "arrogant", "snobby", "snobbish", "elitist",
    "condescending", "patronising", "patronizing", "preachy", "self-indulgent", "shallow",
    "superficial", "vapid", "hollow", "fake", "phony", "phoney", "manipulative", "dishonest",
    "deceptive", "misleading", "exploitative", "predatory", "greedy", "hypocritical", "rude",
    "obnoxious", "tacky", "gaudy", "garish", "cheesy", "corny", "kitschy", "sleazy", "sketchy",
    "shady", "dodgy", "lazy", "wasteful", "overpriced", "pricey", "expensive", "grating",
    // Nouns of condemnation ("X is a nightmare", "a total headache").
    "nightmare", "disaster", "catastrophe", "mess", "headache", "hassle", "pain", "chore",
    "drag", "bore", "menace", "plague", "pest", "nuisance", "scourge", "curse", "bane",
    "blight", "eyesore", "rip-off", "ripoff", "scam", "sham", "fraud", "gimmick", "fad", "joke",
    "farce", "travesty", "tragedy", "crime", "sin", "insult", "abomination", "atrocity",
    "torture", "agony", "ordeal", "hell", "purgatory", "dealbreaker", "deal-breaker",
    "turn-off", "ick", "waste", "overkill", "disappointment", "letdown", "let-down", "nonsense",
    "disgrace", "detrimental", "tyranny", "ugly", "minefield", "peeve", "enemy", "slog",
    "snoozefest", "bummer", "downer", "trap", "mortifying", "cringe-inducing",
];

/// Two words whose stance is not their first word's: a "guilty pleasure" is a pleasure, a
/// "hard pass" is a refusal, and a "pet peeve" is a dislike.
const TWO_WORD: &[(&str, Stance)] = &[
    ("guilty pleasure", Stance::For),
    ("hard pass", Stance::Against),
    ("hard no", Stance::Against),
    ("big no", Stance::Against),
    ("no-go", Stance::Against),
    ("pet peeve", Stance::Against),
    ("happy place", Stance::For),
    ("comfort food", Stance::For),
    ("safe space", Stance::For),
    ("no brainer", Stance::For),
    ("no-brainer", Stance::For),
];

/// Words that stand between a copula and its judgement without a stance of their own:
/// articles, degree words and hedges ("a bit", "kind of", "pure", "a real", "the absolute").
#[rustfmt::skip]
const MODIFIERS: &[&str] = &[
    "a", "an", "the", "bit", "little", "lot", "much", "more", "most", "less", "least", "of",
    "real", "total", "complete", "absolute", "utter", "pure", "sheer", "whole", "true",
    "proper", "such", "kind", "sort", "kinda", "sorta", "special", "certain", "big", "huge",
    "major", "massive", "so", "very", "too", "way", "quite", "rather", "super", "mega",
    "lowkey", "low-key", "highkey", "high-key", "just", "still", "always", "often", "also",
    "even", "all", "like", "my", "one", "idea", "hands", "down", "by", "far", "absolutely",
    "honestly", "simply", "plain", "downright", "straight", "up", "frankly", "kind-of",
    "sort-of", "both", "ever", "truly", "really", "somewhat", "mostly", "largely", "generally",
    "usually", "sometimes", "definitely", "probably", "certainly", "surely", "undeniably",
    "objectively", "seriously", "genuinely", "actually", "literally", "as", "nearly", "almost",
    "small", "tiny", "wee",
];

/// Whether `word` only grades the judgement after it ("a bit", "so", "little").
pub(super) fn is_modifier(word: &str) -> bool {
    MODIFIERS.contains(&word)
}

/// Things whose likeness is a verdict: "tastes like cardboard", "feels like home".
const SIMILES: &[(&str, Stance)] = &[
    ("cardboard", Stance::Against),
    ("soap", Stance::Against),
    ("dirt", Stance::Against),
    ("mud", Stance::Against),
    ("chalk", Stance::Against),
    ("sawdust", Stance::Against),
    ("plastic", Stance::Against),
    ("rubber", Stance::Against),
    ("medicine", Stance::Against),
    ("feet", Stance::Against),
    ("nails", Stance::Against),
    ("homework", Stance::Against),
    ("work", Stance::Against),
    ("punishment", Stance::Against),
    ("death", Stance::Against),
    ("home", Stance::For),
    ("candy", Stance::For),
    ("dessert", Stance::For),
    ("sunshine", Stance::For),
    ("therapy", Stance::For),
    ("meditation", Stance::For),
    ("poetry", Stance::For),
    ("music", Stance::For),
    ("childhood", Stance::For),
    ("a hug", Stance::For),
    ("hug", Stance::For),
    ("dream", Stance::For),
    ("velvet", Stance::For),
    ("silk", Stance::For),
];

/// VADER's lexicon (Hutto & Gilbert 2014): about 7 500 words rated by ten people each, from
/// -4 to 4. A word the lists above do not know is read from it when its mean rating is at
/// least this far from neutral: a lexicon written by others, not against our labelled sets.
const VADER_MIN_VALENCE: f64 = 1.5;

static VADER: LazyLock<HashMap<&'static str, Stance>> = LazyLock::new(|| {
    include_str!("vader_lexicon.tsv")
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (word, valence) = line.split_once('\t')?;
            let valence: f64 = valence.parse().ok()?;
            if valence.abs() < VADER_MIN_VALENCE
                || MODIFIERS.contains(&word)
                || VADER_EXCLUDED.contains(&word)
            {
                return None;
            }
            Some((
                word,
                if valence > 0.0 {
                    Stance::For
                } else {
                    Stance::Against
                },
            ))
        })
        .collect()
});

/// VADER entries that are not a verdict after "is": words of the conversation itself ("ok",
/// "yes", "please"), verbs, and words whose stance flips with the thing judged ("free",
/// "sick", "fire").
#[rustfmt::skip]
const VADER_EXCLUDED: &[&str] = &[
    "ok", "okay", "yes", "no", "yeah", "please", "thanks", "thank", "sure", "true", "like",
    "likes", "liked", "want", "wants", "wanted", "well", "free", "sick", "fire", "killer",
    "help", "helps", "agree", "wish", "hope", "heart", "lol", "haha", "joke", "kidding",
    "alive", "dead", "won", "win", "lost", "care", "cares", "ready", "welcome", "fan", "fans",
    "interest", "interests", "top", "party", "parties", "matter", "matters", "play", "playing",
    "pretty", "easy", "difficult", "marvel",
    // How the subject feels, not what the persona thinks of it: "my mom is fascinated".
    "fascinated", "interested", "excited", "amazed", "thrilled", "delighted", "pleased",
    "annoyed", "frustrated", "worried", "scared", "terrified", "tired", "bored",
    "disappointed", "depressed", "stressed", "confused", "embarrassed", "ashamed", "surprised",
    "shocked", "impressed", "inspired", "relaxed", "satisfied", "obsessed", "exhausted",
    // Popularity and soreness are not verdicts: "BBQ is so popular in the south".
    "popular", "sore",
];

static LEXICON: LazyLock<HashMap<&'static str, Stance>> = LazyLock::new(|| {
    POSITIVE
        .iter()
        .map(|w| (*w, Stance::For))
        .chain(NEGATIVE.iter().map(|w| (*w, Stance::Against)))
        .collect()
});

/// Every word VADER rates, whatever its valence, with our own lists: the words a stretched
/// spelling is checked against ("goooood" is "good", not "god").
static KNOWN: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    include_str!("vader_lexicon.tsv")
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once('\t').map(|(word, _)| word))
        .chain(POSITIVE.iter().copied())
        .chain(NEGATIVE.iter().copied())
        .chain(COMMON_DOUBLED.iter().copied())
        .collect()
});

/// Everyday words with a doubled letter that chat stretches ("soooon", "tooooo") and VADER
/// does not rate.
#[rustfmt::skip]
const COMMON_DOUBLED: &[&str] = &[
    "too", "soon", "food", "book", "books", "feel", "feels", "see", "need", "all", "still",
    "will", "well", "really", "totally", "sleep", "tree", "coffee", "pizza", "summer",
    "little", "better", "pretty", "puppy", "puppies", "kitty", "apple", "apples", "cheese",
    "street", "week", "weekend", "baby", "hello", "tattoo", "tattoos", "school", "pool",
    "moon", "door", "floor", "football", "soccer", "class", "glass", "grass", "dress",
    "yummy", "happy", "funny", "silly", "cookie", "cookies", "balloon",
];

/// Whether `word` is one the lexicons know.
pub(super) fn is_known_word(word: &str) -> bool {
    KNOWN.contains(word)
}

/// The stance of one word: listed, or a superlative of a listed word ("calmest", "dullest",
/// "ugliest").
pub(super) fn word_polarity(word: &str) -> Option<Stance> {
    // Our lists first; VADER only for what they do not know.
    let listed = |word: &str| LEXICON.get(word).or_else(|| VADER.get(word)).copied();
    if let Some(stance) = listed(word) {
        return Some(stance);
    }
    let stem = word.strip_suffix("est")?;
    let candidates = [
        stem.strip_suffix('i').map(|s| format!("{s}y")),
        Some(stem.to_string()),
        Some(format!("{stem}e")),
        // "saddest" → "sad": a doubled consonant.
        stem.char_indices()
            .last()
            .filter(|(i, c)| *i > 0 && stem[..*i].ends_with(*c))
            .map(|(i, _)| stem[..i].to_string()),
    ];
    candidates
        .into_iter()
        .flatten()
        .find_map(|base| listed(base.as_str()))
}

/// The stance of the judgement at the start of `text`: the first evaluative word after any
/// modifiers ("a bit dull", "the absolute worst", "pure bliss", "lowkey amazing"). An adverb
/// in "-ly" is a modifier too ("wonderfully romantic", "painfully dull"); when nothing
/// evaluative follows it, its own stem decides ("beautifully"). Too much or the least of a
/// good thing is against it: "too sweet", "too light", "my least favourite".
pub(super) fn polarity(text: &str) -> Option<Stance> {
    let stance = plain_polarity(text)?;
    Some(if stance == Stance::For && too_much_or_least(text) {
        Stance::Against
    } else {
        stance
    })
}

/// Whether the modifiers before a judgement's first evaluative word say too much of it or the
/// least of it ("too rich", "the least favourite").
fn too_much_or_least(text: &str) -> bool {
    let mut marked = false;
    for word in leading_words(text) {
        if matches!(word, "too" | "least") {
            marked = true;
            continue;
        }
        if MODIFIERS.contains(&word) {
            continue;
        }
        return marked && can_be_too_much(word);
    }
    false
}

/// Whether too much of what `word` praises is a fault ("too sweet", "too rich"); praise
/// that cannot be had in excess ("too good", "too cute", "too funny") stays praise.
fn can_be_too_much(word: &str) -> bool {
    !NEVER_TOO_MUCH.contains(&word)
}

/// Praise that stays praise after "too": "too good", "too cute", "too funny".
const NEVER_TOO_MUCH: &[&str] = &[
    "good",
    "cute",
    "funny",
    "adorable",
    "amazing",
    "perfect",
    "beautiful",
    "awesome",
    "cool",
    "kind",
    "precious",
    "great",
    "fun",
    "hilarious",
    "lovely",
];

/// The first six words of a judgement: where its verdict is read.
fn leading_words(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '-'))
        .filter(|w| !w.is_empty())
        .take(6)
        .collect()
}

fn plain_polarity(text: &str) -> Option<Stance> {
    let words = leading_words(text);
    let mut adverb = None;
    let mut after_like = false;
    for (i, &word) in words.iter().enumerate() {
        if let Some(next) = words.get(i + 1)
            && let Some((_, stance)) = TWO_WORD
                .iter()
                .find(|(pair, _)| pair.split_once(' ') == Some((word, next)))
        {
            return Some(*stance);
        }
        // "tastes like cardboard", "sounds like heaven": the thing compared to judges.
        if after_like
            && let Some(stance) = SIMILES
                .iter()
                .find_map(|(w, stance)| (*w == word).then_some(*stance))
        {
            return Some(stance);
        }
        after_like = word == "like";
        // "best known for", "well known": fame, not a verdict.
        if words.get(i + 1) == Some(&"known") {
            return None;
        }
        // "right next to the bookstore", "right now": a place or a time, not a verdict.
        if word == "right"
            && words.get(i + 1).is_some_and(|next| {
                matches!(
                    *next,
                    "next"
                        | "there"
                        | "here"
                        | "now"
                        | "behind"
                        | "after"
                        | "before"
                        | "around"
                        | "across"
                        | "by"
                        | "up"
                        | "down"
                        | "away"
                        | "on"
                        | "in"
                        | "at"
                        | "outside"
                        | "inside"
                        | "beside"
                        | "off"
                        | "back"
                )
            })
        {
            return None;
        }
        if let Some(stance) = word_polarity(word) {
            return Some(stance);
        }
        // "originally based", "fairly new": adverbs of time and degree whose stems judge.
        if matches!(
            word,
            "originally" | "fairly" | "rightly" | "freshly" | "purely" | "naturally" | "finally"
        ) {
            continue;
        }
        if let Some(stem) = word.strip_suffix("ly").filter(|s| s.len() > 2) {
            adverb = adverb.or_else(|| {
                word_polarity(stem).or_else(|| {
                    stem.strip_suffix('i')
                        .and_then(|s| word_polarity(&format!("{s}y")))
                })
            });
            continue;
        }
        // "pretty" judges only alone ("the harbour is pretty"); before another word it is a
        // degree ("a pretty strange emotion").
        if word == "pretty" {
            if i + 1 == words.len() {
                adverb = adverb.or(Some(Stance::For));
            }
            continue;
        }
        if !MODIFIERS.contains(&word) {
            break;
        }
    }
    adverb
}

/// Comparative adjectives' own polarity: "warmer", "cozier", "duller".
pub(super) fn comparative_polarity(word: &str) -> Option<Stance> {
    const BETTER: &[&str] = &[
        "better",
        "nicer",
        "warmer",
        "richer",
        "cozier",
        "cosier",
        "lovelier",
        "tastier",
        "sweeter",
        "superior",
        "preferable",
        "friendlier",
        "kinder",
        "smarter",
        "happier",
        "calmer",
        "brighter",
        "deeper",
        "fresher",
        "prettier",
        "cooler",
        "greater",
        "funnier",
        "healthier",
        "wiser",
        "gentler",
        "quieter",
        "safer",
        "cleaner",
        "smoother",
        "livelier",
        "comfier",
    ];
    const WORSE: &[&str] = &[
        "worse", "inferior", "duller", "blander", "colder", "uglier", "noisier", "harsher",
        "sadder", "weaker", "poorer", "louder", "messier", "grosser", "lamer", "scarier",
        "creepier", "nastier", "tackier",
    ];
    if BETTER.contains(&word) {
        Some(Stance::For)
    } else if WORSE.contains(&word) {
        Some(Stance::Against)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_word_has_two_stances_and_no_modifier_has_one() {
        for word in POSITIVE {
            assert!(!NEGATIVE.contains(word), "{word} is in both lists");
        }
        for word in MODIFIERS {
            assert!(LEXICON.get(word).is_none(), "modifier {word} has a stance");
        }
    }

    #[test]
    fn a_judgement_is_read_past_its_modifiers() {
        let cases = [
            ("a bit dull", Some(Stance::Against)),
            ("the absolute worst", Some(Stance::Against)),
            ("pure bliss", Some(Stance::For)),
            ("lowkey amazing", Some(Stance::For)),
            ("wonderfully romantic", Some(Stance::For)),
            ("painfully dull", Some(Stance::Against)),
            ("pretty dull", Some(Stance::Against)),
            ("pretty", Some(Stance::For)),
            ("beautifully", Some(Stance::For)),
            ("the calmest place", Some(Stance::For)),
            ("the saddest song", Some(Stance::Against)),
            ("the ugliest building", Some(Stance::Against)),
            ("my idea of hell", Some(Stance::Against)),
            ("like heaven", Some(Stance::For)),
            ("like cardboard", Some(Stance::Against)),
            ("like a warm hug", Some(Stance::For)),
            ("like a city", None),
            ("my guilty pleasure", Some(Stance::For)),
            ("my pet peeve", Some(Stance::Against)),
            ("a hard pass for me", Some(Stance::Against)),
            ("a small miracle", Some(Stance::For)),
            ("the queen of spreads", Some(Stance::For)),
            ("a minefield", Some(Stance::Against)),
            ("the capital of japan", None),
            ("cloudy today", None),
            ("at three", None),
        ];
        for (text, expected) in cases {
            assert_eq!(polarity(text), expected, "{text:?}");
        }
    }
}
