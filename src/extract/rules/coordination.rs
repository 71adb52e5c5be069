//! Lists and pairs read as one view of each thing named: the items of a favourites list
//! ("pizza, tacos and sushi"), and two things liked together ("hiking and being outside").
//! A list after a verb of liking is read in `clause`, item by item, with these.

use super::*;

/// A list item without the "and" / "or" that joined it: "and sushi" is "sushi".
pub(super) fn without_leading_conjunction(item: &str) -> &str {
    let item = item.trim();
    ["and ", "or "]
        .iter()
        .find_map(|lead| item.strip_prefix(lead))
        .unwrap_or(item)
        .trim()
}

/// The items of a favourites list: "pizza, tacos and sushi" (enumerated with commas), or, when
/// the favourites are plural, "radiohead and the smiths" ("rock and roll" stays one thing: no
/// article marks a second item). `None` when `rest` names one thing.
pub(super) fn favourite_items(whole: &str, rest: &str) -> Option<Vec<String>> {
    let end = [
        " because ",
        " but ",
        " since ",
        " though ",
        " which ",
        " when ",
        " so ",
    ]
    .iter()
    .filter_map(|cut| rest.find(cut))
    .min()
    .unwrap_or(rest.len());
    let list = rest[..end].trim().trim_end_matches(['.', '!', ';']);
    let mut items: Vec<&str> = list.split(", ").collect();
    if items.len() >= 2 {
        // "tacos and sushi" / "tacos or sushi" at the end; a leading "and" / "or" goes below.
        let last = items.pop()?;
        items.extend(last.split(" and ").flat_map(|item| item.split(" or ")));
    } else {
        let plural = whole.contains("favorites ")
            || whole.contains("favourites ")
            || whole.contains(" are ");
        if !plural {
            return None;
        }
        items = list
            .split(" and the ")
            .flat_map(|item| item.split(" and my "))
            .collect();
    }
    let items: Vec<String> = items
        .iter()
        .map(|item| without_leading_conjunction(item).to_string())
        .filter(|item| !item.is_empty())
        .collect();
    (items.len() >= 2
        && items
            .iter()
            .all(|item| item.split_whitespace().count() <= 5))
    .then_some(items)
}

/// "I love hiking and being outside": two things liked together are a view of each, as the
/// labelled sets read them (28 of the 36 pairs the rules read as one topic in the tuning sets
/// were two views there). A pair that names one thing (`ONE_THING_PAIR`: "salt and vinegar")
/// stays one, as does a pair of judging words ("nice and warm") and a pair either side of
/// which is no topic on its own; "art and all" is art.
pub(super) fn split_coordinated(opinion: ExtractedOpinion) -> Vec<ExtractedOpinion> {
    let Some(c) = COORDINATED.captures(&opinion.name) else {
        return vec![opinion];
    };
    // "salt and vinegar", "key and peele sketches": a pair that names one thing, in the name.
    let padded = format!(" {} ", opinion.name);
    if ONE_THING_PAIR
        .iter()
        .any(|pair| padded.contains(&format!(" {pair} ")))
    {
        return vec![opinion];
    }
    let (first, second) = (&c["topic"], &c["other"]);
    let single_judgement = |side: &str| !side.contains(' ') && polarity(side).is_some();
    if single_judgement(first) || single_judgement(second) {
        return vec![opinion];
    }
    let filler = matches!(
        second,
        "all"
            | "all that"
            | "stuff"
            | "such"
            | "everything"
            | "things"
            | "so on"
            | "more"
            | "others"
            | "the like"
            | "whatnot"
    );
    let read_side = |side: &str| {
        let mut read = make(
            COORDINATED,
            side,
            opinion.stance,
            &opinion.evidence,
            &opinion.evidence,
        )?;
        read.strength = opinion.strength;
        read.related_user_ids = opinion.related_user_ids.clone();
        read.found_by = opinion.found_by.clone();
        Some(read_within(COORDINATED, read))
    };
    let read = if filler {
        read_side(first).into_iter().collect()
    } else {
        match (read_side(first), read_side(second)) {
            (Some(first), Some(second)) => vec![first, second],
            _ => Vec::new(),
        }
    };
    if read.is_empty() { vec![opinion] } else { read }
}
