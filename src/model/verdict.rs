//! The LLM's verdict on a grey-zone match, as the rules take it.

/// What the adjudicator decided about a candidate and an existing preference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub same_topic: bool,
    /// Meaningful only for the same topic.
    pub same_stance: bool,
}

impl Verdict {
    /// The metric label of this outcome.
    pub fn outcome(self) -> &'static str {
        match (self.same_topic, self.same_stance) {
            (false, _) => "different_topic",
            (true, true) => "same_stance",
            (true, false) => "opposite_stance",
        }
    }
}
