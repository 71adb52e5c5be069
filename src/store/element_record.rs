//! An active preference's whole record, read from its element's attributes in the persona's
//! vector set, in the service rather than in Redis.
//!
//! `scripts/record.lua` writes the encoding (`whole_attributes`) and every write script reads
//! it back there (`record_from_attributes`). Reads for the service ([`scripts::READ`]) used to
//! decode it in Lua too: about a third of Redis's time in ingest's scripts went to decoding a
//! record the service then parsed again (issue 32). Now [`scripts::READ`] hands over the raw
//! attributes and [`record_from_whole_attributes`] does here what `record_from_attributes` does
//! there, field for field, on the workers, which scale out, instead of on Redis's one thread.
//! The store suite checks the two agree on records of every shape.
//!
//! [`scripts::READ`]: super::scripts::READ

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::record::field;

/// The record's fields beyond injection's view, by their short names in the attributes
/// (`SHORT_NAMES` in record.lua).
const LONG_NAMES: [(&str, &str); 18] = [
    ("tu", field::TRIGGERING_USER_ID),
    ("tm", field::TRIGGERING_MESSAGE_ID),
    ("pm", field::PERSONA_MESSAGE_ID),
    ("sp", field::SOURCE_PLATFORM),
    ("sc", field::SOURCE_CHANNEL_ID),
    ("kg", field::RELATED_KG_UUIDS),
    ("eu", field::EVIDENCE_USER_IDS),
    ("eh", field::EVOLUTION_HISTORY),
    ("ca", field::CREATED_AT),
    ("rf", field::REINFORCEMENTS),
    ("ed", field::EVIDENCE_USERS_DROPPED),
    ("hd", field::HISTORY_ENTRIES_DROPPED),
    ("v", field::VERSION),
    ("if", field::INHERITED_FROM),
    ("vo", field::VOICINGS),
    ("bl", field::BASELINE),
    ("vf", field::VOICED_FROM),
    ("rv", field::REV),
];

/// Fields holding JSON of their own, written with quotes and apostrophes swapped when the
/// attributes say `w` = 2 (`QUOTES_SWAPPED` in record.lua).
const QUOTES_SWAPPED: [&str; 6] = ["kg", "eu", "eh", "rf", "vo", "bl"];

/// The fields a voicing kept once (`vr`) is rebuilt from (`VOICING_FIELDS`, `VOICING_LISTS`).
const VOICING_FIELDS: [(&str, &str); 10] = [
    ("at", field::STANCE_AT),
    ("st", field::STANCE),
    ("n", field::NAME),
    ("o", field::OPINION),
    ("c", field::CATEGORY),
    ("tu", field::TRIGGERING_USER_ID),
    ("tm", field::TRIGGERING_MESSAGE_ID),
    ("pm", field::PERSONA_MESSAGE_ID),
    ("sp", field::SOURCE_PLATFORM),
    ("sc", field::SOURCE_CHANNEL_ID),
];
const VOICING_LISTS: [(&str, &str); 2] = [
    ("ru", field::RELATED_USER_IDS),
    ("kg", field::RELATED_KG_UUIDS),
];

/// The record preference `id` of `persona_id` keeps as its element's attributes `raw`, as
/// field -> text, the way a hash would hold it; `None` for attributes that are not a whole
/// record (a view only, or unreadable), which record.lua's reader takes for no record too.
pub fn record_from_whole_attributes(
    raw: &[u8],
    id: &str,
    persona_id: &str,
) -> Option<HashMap<String, String>> {
    let Ok(Value::Object(attributes)) = serde_json::from_slice::<Value>(raw) else {
        return None;
    };
    let marker = attributes.get("w").filter(|w| !w.is_null())?;
    let swapped = marker.as_f64() == Some(2.0);
    let mut record = HashMap::with_capacity(attributes.len() + 4);
    record.insert(field::ID.to_string(), id.to_string());
    record.insert(field::PERSONA_ID.to_string(), persona_id.to_string());
    record.insert(field::ACTIVE.to_string(), "1".to_string());
    let mut put = |name: &str, value: Option<String>| {
        if let Some(value) = value {
            record.insert(name.to_string(), value);
        }
    };
    let text = |short: &str| non_empty(attributes.get(short));
    put(field::NAME, text("n"));
    put(field::OPINION, text("o"));
    put(field::CATEGORY, text("c"));
    // A number from attributes written before the strength was kept as text reads as Lua's
    // tostring says it; text as it is (empty too).
    put(
        field::STRENGTH,
        attributes.get("s").and_then(lua_value_text),
    );
    put(field::STANCE, text("st"));
    put(field::STANCE_AT, text("sa"));
    // A missing last voicing is the stance's own; one present but empty is none (Lua's `or`
    // takes any string).
    put(
        field::LAST_REINFORCED,
        match attributes.get("lr").filter(|v| !v.is_null()) {
            Some(value) => non_empty(Some(value)),
            None => text("sa"),
        },
    );
    if let Some(Value::String(users)) = attributes.get("u")
        && !users.is_empty()
    {
        let list: Vec<&str> = users.split(',').filter(|user| !user.is_empty()).collect();
        put(
            field::RELATED_USER_IDS,
            Some(serde_json::to_string(&list).unwrap_or_else(|_| "[]".into())),
        );
        put(field::RELATED_USER_IDS_INDEX, Some(users.clone()));
    }
    if truthy(attributes.get("rn")).is_none() {
        let count = attributes
            .get("rc")
            .filter(|v| !v.is_null() && *v != &Value::Bool(false))
            .and_then(lua_value_text)
            .unwrap_or_else(|| "0".into());
        put(field::REINFORCEMENT_COUNT, Some(count));
    }
    if truthy(attributes.get("cu")).is_some() {
        put(field::CURATED, Some("1".into()));
    }
    for (short, long) in LONG_NAMES {
        let Some(value) = attributes.get(short).and_then(lua_value_text) else {
            continue;
        };
        if swapped && QUOTES_SWAPPED.contains(&short) {
            put(long, Some(swap_quotes(&value)));
        } else {
            put(long, Some(value));
        }
    }
    if let Some(Value::Object(others)) = attributes.get("x") {
        for (name, value) in others {
            put(name, lua_value_text(value));
        }
    }
    if truthy(attributes.get("vr")).is_some() {
        let voicing = the_records_voicing(&record);
        record.insert(field::VOICINGS.to_string(), voicing);
    }
    Some(record)
}

/// Lua's truth: anything but a missing value and `false` (cjson's null is a value).
fn truthy(value: Option<&Value>) -> Option<&Value> {
    value.filter(|v| **v != Value::Bool(false))
}

/// A value as text when it is not empty (`text` in record.lua).
fn non_empty(value: Option<&Value>) -> Option<String> {
    value
        .filter(|v| !v.is_null())
        .and_then(lua_value_text)
        .filter(|text| !text.is_empty())
}

/// A decoded value as the text Redis would hand back from Lua: a string as it is, a number as
/// Lua writes it (`%.14g`), `true` as 1; none for `false` and null. Objects and arrays never
/// stand where record.lua writes text; should one, its JSON is kept rather than dropped.
fn lua_value_text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => number.as_f64().map(lua_number_text),
        Value::Bool(true) => Some("1".into()),
        Value::Bool(false) | Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// Lua 5.1's `tostring` of a number: C's `%.14g`.
fn lua_number_text(x: f64) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // The exponent after rounding to 14 significant digits decides the form.
    let scientific = format!("{x:.13e}");
    let (mantissa, exponent) = scientific
        .split_once('e')
        .expect("Rust's exponent form has an e");
    let exponent: i32 = exponent.parse().expect("an integer exponent");
    if !(-4..14).contains(&exponent) {
        let mantissa = strip_fraction_zeros(mantissa);
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exponent.abs());
    }
    let decimals = (13 - exponent) as usize;
    strip_fraction_zeros(&format!("{x:.decimals$}")).to_string()
}

fn strip_fraction_zeros(text: &str) -> &str {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    }
}

/// Quotes and apostrophes swapped (a bijection: record.lua's `swap_quotes`).
fn swap_quotes(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '"' => '\'',
            '\'' => '"',
            other => other,
        })
        .collect()
}

/// The one voicing a record's fields say (`the_records_voicing` in record.lua), as the
/// timeline holds it: its strength the record's own text, to the last digit.
fn the_records_voicing(record: &HashMap<String, String>) -> String {
    let mut voicing = Map::new();
    for (short, long) in VOICING_FIELDS {
        if let Some(value) = record.get(long).filter(|v| !v.is_empty()) {
            voicing.insert(short.into(), Value::String(value.clone()));
        }
    }
    for (short, long) in VOICING_LISTS {
        let list = decode_list(record.get(long));
        if !list.is_empty() {
            voicing.insert(short.into(), Value::Array(list));
        }
    }
    let strength = record.get(field::STRENGTH).map_or("0", String::as_str);
    let rest = Value::Object(voicing).to_string();
    if rest == "{}" {
        format!("[{{\"s\":{strength}}}]")
    } else {
        format!("[{{\"s\":{strength},{}]", &rest[1..])
    }
}

/// Fields left out of a record while they hold their default (`DEFAULT_VALUES` in guard.lua).
const DEFAULT_VALUES: [(&str, &str); 12] = [
    (field::RELATED_USER_IDS, "[]"),
    (field::RELATED_USER_IDS_INDEX, ""),
    (field::RELATED_KG_UUIDS, "[]"),
    (field::EVIDENCE_USER_IDS, "[]"),
    (field::EVIDENCE_USERS_DROPPED, "0"),
    (field::EVOLUTION_HISTORY, "[]"),
    (field::HISTORY_ENTRIES_DROPPED, "0"),
    (field::INHERITED_FROM, ""),
    (field::CURATED, "0"),
    (field::REINFORCEMENTS, "[]"),
    (field::BASELINE, ""),
    (field::VOICINGS, ""),
];

/// Fields an element's attributes say in injection's own terms, or that its key or its place
/// says (`VIEWED` in record.lua).
const VIEWED: [&str; 15] = [
    field::ID,
    field::PERSONA_ID,
    field::ACTIVE,
    field::EMBEDDING,
    field::NAME,
    field::OPINION,
    field::CATEGORY,
    field::STRENGTH,
    field::STANCE,
    field::STANCE_AT,
    field::LAST_REINFORCED,
    field::RELATED_USER_IDS,
    field::RELATED_USER_IDS_INDEX,
    field::REINFORCEMENT_COUNT,
    field::CURATED,
];

/// A preference's element as a write leaves it, encoded in the service: its whole attributes
/// and injection's view of them (what the users' own sets copy).
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedElement {
    pub whole: String,
    pub view: String,
}

/// The record `fields` (name, value; `embedding` aside) make of `read` when written over it
/// by a write script (`write_record` in guard.lua after `with_next_rev`): each field replaces
/// the one read, a field at its default is left out, and the revision counts one up.
/// `None` when a value is not text, which the scripts alone then handle.
pub fn record_written_over(
    read: &HashMap<String, String>,
    fields: &[(&str, Vec<u8>)],
) -> Option<HashMap<String, String>> {
    let next_revision = read
        .get(field::REV)
        .and_then(|rev| lua_to_number(rev))
        .unwrap_or(0.0)
        + 1.0;
    let revision = [(field::REV, lua_number_text(next_revision).into_bytes())];
    write_over(read.clone(), fields.iter().chain(&revision))
}

/// The record a new preference's `fields` make (add.lua's `write_record` on no record: the
/// revision is among the fields, as the caller gives it).
pub fn new_record(fields: &[(&str, Vec<u8>)]) -> Option<HashMap<String, String>> {
    write_over(HashMap::new(), fields.iter())
}

fn write_over<'a>(
    mut record: HashMap<String, String>,
    fields: impl Iterator<Item = &'a (&'a str, Vec<u8>)>,
) -> Option<HashMap<String, String>> {
    record.remove(field::EMBEDDING);
    for (name, value) in fields {
        if *name == field::EMBEDDING {
            continue;
        }
        let value = std::str::from_utf8(value).ok()?;
        if DEFAULT_VALUES.contains(&(*name, value)) {
            record.remove(*name);
        } else {
            record.insert((*name).to_string(), value.to_string());
        }
    }
    Some(record)
}

/// The element of active record `r` (`injection_view` and `whole_attributes` in record.lua):
/// what record.lua's reader and [`record_from_whole_attributes`] read back as `r`.
pub fn encode_element(r: &HashMap<String, String>) -> EncodedElement {
    let text = |name: &str| r.get(name).map_or("", String::as_str);
    let mut view = Map::new();
    let strength = match r.get(field::STRENGTH) {
        Some(strength) if lua_to_number(strength).is_some() => strength.as_str(),
        _ => "0",
    };
    view.insert("n".into(), text(field::NAME).into());
    view.insert("o".into(), text(field::OPINION).into());
    view.insert("c".into(), text(field::CATEGORY).into());
    view.insert("s".into(), strength.into());
    view.insert("st".into(), text(field::STANCE).into());
    view.insert("sa".into(), text(field::STANCE_AT).into());
    if text(field::LAST_REINFORCED) != text(field::STANCE_AT) {
        view.insert("lr".into(), text(field::LAST_REINFORCED).into());
    }
    let users = decode_list(r.get(field::RELATED_USER_IDS));
    if !users.is_empty() {
        let joined: Vec<String> = users
            .iter()
            .map(|user| lua_value_text(user).unwrap_or_default())
            .collect();
        view.insert("u".into(), joined.join(",").into());
    }
    let reinforcements = r
        .get(field::REINFORCEMENT_COUNT)
        .and_then(|count| lua_to_number(count))
        .unwrap_or(0.0);
    if reinforcements != 0.0 {
        view.insert("rc".into(), lua_number_value(reinforcements));
    }
    if text(field::CURATED) == "1" {
        view.insert("cu".into(), true.into());
    }
    let view_text = Value::Object(view.clone()).to_string();

    let mut whole = view;
    whole.insert("w".into(), 2.into());
    if !r.contains_key(field::STRENGTH) {
        whole.remove("s");
    }
    if !r.contains_key(field::REINFORCEMENT_COUNT) {
        whole.insert("rn".into(), 1.into());
    }
    let first_version = text(field::VERSION) == "1"
        && !r.contains_key(field::EVOLUTION_HISTORY)
        && !r.contains_key(field::HISTORY_ENTRIES_DROPPED);
    let voicing_kept_once = voicing_is_the_records(r);
    if voicing_kept_once {
        whole.insert("vr".into(), 1.into());
    }
    let mut others = Map::new();
    for (name, value) in r {
        if VIEWED.contains(&name.as_str())
            || (name == field::VERSION && first_version)
            || (name == field::VOICINGS && voicing_kept_once)
        {
            continue;
        }
        match LONG_NAMES.iter().find(|(_, long)| long == name) {
            Some((short, _)) if QUOTES_SWAPPED.contains(short) => {
                whole.insert((*short).into(), swap_quotes(value).into());
            }
            Some((short, _)) => {
                whole.insert((*short).into(), value.clone().into());
            }
            None => {
                others.insert(name.clone(), value.clone().into());
            }
        }
    }
    if !others.is_empty() {
        whole.insert("x".into(), Value::Object(others));
    }
    EncodedElement {
        whole: Value::Object(whole).to_string(),
        view: view_text,
    }
}

/// The element a write script may place as it is (add.lua, apply.lua): `record` encoded,
/// unless it holds a field of an earlier system named `rv` (kept under `x`), since the
/// script finds the revision by the text `"rv":"`.
pub fn placeable_element(record: HashMap<String, String>) -> Option<EncodedElement> {
    (!record.contains_key("rv")).then(|| encode_element(&record))
}

/// Whether the record's one voicing says exactly what its fields say (`voicing_is_the_records`
/// in record.lua), so the element keeps `vr` in its place.
fn voicing_is_the_records(r: &HashMap<String, String>) -> bool {
    let Some(raw) = r.get(field::VOICINGS) else {
        return false;
    };
    if !raw.starts_with("[{") || raw.contains("},{") {
        return false;
    }
    let Ok(Value::Array(list)) = serde_json::from_str::<Value>(raw) else {
        return false;
    };
    let [Value::Object(voicing)] = &list[..] else {
        return false;
    };
    let Some(strength) = r.get(field::STRENGTH).filter(|s| json_number(s)) else {
        return false;
    };
    match (voicing.get("s"), lua_to_number(strength)) {
        (Some(Value::Number(said)), Some(own)) if said.as_f64() == Some(own) => {}
        _ => return false,
    }
    for (name, value) in voicing {
        if let Some((_, long)) = VOICING_FIELDS.iter().find(|(short, _)| short == name) {
            match value {
                Value::String(text) if !text.is_empty() && r.get(*long) == Some(text) => {}
                _ => return false,
            }
        } else if let Some((_, long)) = VOICING_LISTS.iter().find(|(short, _)| short == name) {
            match value {
                Value::Array(items) if !items.is_empty() && *items == decode_list(r.get(*long)) => {
                }
                _ => return false,
            }
        } else if name != "s" {
            return false;
        }
    }
    let empty = |long: &str| r.get(long).is_none_or(String::is_empty);
    VOICING_FIELDS
        .iter()
        .all(|(short, long)| voicing.contains_key(*short) || empty(long))
        && VOICING_LISTS.iter().all(|(short, long)| {
            voicing.contains_key(*short) || decode_list(r.get(*long)).is_empty()
        })
}

/// A JSON list held as text (`decode_list`): empty for none, `[]` or `{}`.
fn decode_list(raw: Option<&String>) -> Vec<Value> {
    match raw.map(String::as_str) {
        None | Some("" | "[]" | "{}") => Vec::new(),
        Some(raw) => match serde_json::from_str(raw) {
            Ok(Value::Array(items)) => items,
            _ => Vec::new(),
        },
    }
}

/// JSON's own number form, which a voicing's strength is written back in (`json_number`).
fn json_number(text: &str) -> bool {
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    let unsigned = text.strip_prefix('-').unwrap_or(text);
    match unsigned.split_once('.') {
        None => digits(unsigned),
        Some((whole, fraction)) => digits(whole) && digits(fraction),
    }
}

/// Lua's `tonumber` of a text, as far as the records' own texts go (decimal numbers, with
/// spaces around allowed).
fn lua_to_number(text: &str) -> Option<f64> {
    let trimmed = text.trim();
    if trimmed.is_empty() || trimmed.starts_with('+') {
        return None;
    }
    trimmed.parse::<f64>().ok()
}

/// A Lua number as cjson writes it: an integer where it is one.
fn lua_number_value(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        Value::from(x as i64)
    } else {
        Value::from(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_lua_writes_them() {
        for (number, text) in [
            (0.5, "0.5"),
            (3.0, "3"),
            (-2.0, "-2"),
            (0.0, "0"),
            (0.1 + 0.2, "0.3"),
            (0.575_000_000_000_000_1, "0.575"),
            (1.0 / 3.0, "0.33333333333333"),
            (123_456_789_012_345.0, "1.2345678901234e+14"),
            (99_999_999_999_999.0, "99999999999999"),
            (0.000_1, "0.0001"),
            (0.000_012_5, "1.25e-05"),
            (1e100, "1e+100"),
        ] {
            assert_eq!(lua_number_text(number), text, "{number:?}");
        }
    }

    fn read(raw: &str) -> Option<HashMap<String, String>> {
        record_from_whole_attributes(raw.as_bytes(), "p1", "ada")
    }

    #[test]
    fn attributes_that_are_a_view_only_hold_no_record() {
        assert_eq!(read(r#"{"n":"tea","o":"good","s":"0.5"}"#), None);
        assert_eq!(read("not json"), None);
        assert_eq!(read("[1,2]"), None);
    }

    #[test]
    fn a_whole_record_reads_back_under_its_long_names() {
        let record = read(
            r#"{"w":2,"n":"tea","o":"I love tea","c":"taste","s":"0.57500000000000007","st":"likes","sa":"2026-11-20T10:00:00Z","u":"sam,kim","rc":2,"cu":true,"rv":"4","eu":"['sam']","ca":"2026-11-19T00:00:00Z","x":{"legacy":"kept"}}"#,
        )
        .unwrap();
        let expect = |name: &str, value: &str| {
            assert_eq!(record.get(name).map(String::as_str), Some(value), "{name}")
        };
        expect("id", "p1");
        expect("persona_id", "ada");
        expect("active", "1");
        expect("name", "tea");
        expect("strength", "0.57500000000000007");
        expect("last_reinforced", "2026-11-20T10:00:00Z");
        expect("related_user_ids", r#"["sam","kim"]"#);
        expect("related_user_ids_index", "sam,kim");
        expect("reinforcement_count", "2");
        expect("curated", "1");
        expect("rev", "4");
        expect("evidence_user_ids", r#"["sam"]"#);
        expect("created_at", "2026-11-19T00:00:00Z");
        expect("legacy", "kept");
        assert!(!record.contains_key("voicings"));
    }

    #[test]
    fn quotes_are_swapped_back_only_in_attributes_written_swapped() {
        let swapped = read(r#"{"w":2,"n":"t","eu":"['it\"s']"}"#).unwrap();
        assert_eq!(swapped["evidence_user_ids"], r#"["it's"]"#);
        let before = read(r#"{"w":1,"n":"t","eu":"[\"sam\"]"}"#).unwrap();
        assert_eq!(before["evidence_user_ids"], r#"["sam"]"#);
    }

    #[test]
    fn an_empty_last_voicing_is_none_and_a_missing_one_is_the_stances() {
        let missing = read(r#"{"w":2,"n":"t","sa":"2026-01-01"}"#).unwrap();
        assert_eq!(missing["last_reinforced"], "2026-01-01");
        let empty = read(r#"{"w":2,"n":"t","sa":"2026-01-01","lr":""}"#).unwrap();
        assert!(!empty.contains_key("last_reinforced"));
    }

    #[test]
    fn an_unknown_reinforcement_count_stays_unknown() {
        let record = read(r#"{"w":2,"n":"t","rn":1}"#).unwrap();
        assert!(!record.contains_key("reinforcement_count"));
        let never = read(r#"{"w":2,"n":"t"}"#).unwrap();
        assert_eq!(never["reinforcement_count"], "0");
    }

    #[test]
    fn a_write_replaces_fields_leaves_defaults_out_and_counts_the_revision_up() {
        let read: HashMap<String, String> = [
            ("id", "p1"),
            ("name", "tea"),
            ("rev", "7"),
            ("evidence_user_ids", r#"["sam"]"#),
            ("legacy", "kept"),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
        let fields = [
            ("name", b"green tea".to_vec()),
            ("evidence_user_ids", b"[]".to_vec()),
            ("curated", b"0".to_vec()),
            ("source_channel_id", b"".to_vec()),
            ("embedding", vec![0, 0, 128, 63]),
        ];
        let written = record_written_over(&read, &fields).unwrap();
        assert_eq!(written["name"], "green tea");
        assert_eq!(written["rev"], "8");
        assert_eq!(written["legacy"], "kept");
        assert_eq!(written["source_channel_id"], "", "empty, but not a default");
        for gone in ["evidence_user_ids", "curated", "embedding"] {
            assert!(!written.contains_key(gone), "{gone}");
        }
        let first = record_written_over(&HashMap::new(), &[]).unwrap();
        assert_eq!(first["rev"], "1");
        assert_eq!(record_written_over(&read, &[("name", vec![0xff])]), None);
    }

    #[test]
    fn an_encoded_element_reads_back_as_the_record() {
        let record: HashMap<String, String> = [
            ("id", "p1"),
            ("persona_id", "ada"),
            ("active", "1"),
            ("name", "tea"),
            ("opinion", "It's \"fine\""),
            ("category", "taste"),
            ("strength", "0.30000000000000004"),
            ("stance", "likes"),
            ("stance_at", "2026-01-01"),
            ("last_reinforced", "2026-01-02"),
            ("related_user_ids", r#"["sam","kim"]"#),
            ("related_user_ids_index", "sam,kim"),
            ("reinforcement_count", "3"),
            ("evidence_user_ids", r#"["o'neil"]"#),
            ("version", "2"),
            ("rev", "4"),
            ("legacy", "kept"),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
        let element = encode_element(&record);
        let back = record_from_whole_attributes(element.whole.as_bytes(), "p1", "ada").unwrap();
        assert_eq!(back, record);
        let view: Value = serde_json::from_str(&element.view).unwrap();
        assert_eq!(view["u"], "sam,kim");
        assert_eq!(view["rc"], 3);
        assert!(
            view.get("w").is_none() && view.get("rv").is_none(),
            "{view}"
        );
    }

    #[test]
    fn a_voicing_kept_once_is_rebuilt_from_the_fields() {
        let record = read(
            r#"{"w":2,"vr":1,"n":"tea","o":"I love tea","c":"taste","s":"0.5","st":"likes","sa":"2026-01-01","u":"sam","tu":"sam"}"#,
        )
        .unwrap();
        let voicings: Value = serde_json::from_str(&record["voicings"]).unwrap();
        assert_eq!(
            voicings,
            serde_json::json!([{"s": 0.5, "n": "tea", "o": "I love tea", "c": "taste",
                "st": "likes", "at": "2026-01-01", "tu": "sam", "ru": ["sam"]}])
        );
    }
}
