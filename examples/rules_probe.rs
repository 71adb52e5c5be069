//! What the offline rules extractor reads in each argument: topics and stances.
//! `cargo run --example rules_probe -- "Cats over dogs, always." "I love how snow falls."`

fn main() {
    let r = persona_prefs::extract::rules::RulesExtractor::new(8);
    for text in std::env::args().skip(1) {
        let found: Vec<(String, String)> = r
            .extract_text(&text)
            .into_iter()
            .map(|o| (o.name, o.stance.as_str().to_string()))
            .collect();
        println!("{text:?} -> {found:?}");
    }
}
