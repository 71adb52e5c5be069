//! W3C Trace Context (`traceparent`) carried through the service, so a chat pipeline's trace
//! continues through ingest and injection.
//!
//! An event or request that carries a valid `traceparent` NATS header is handled in a span
//! with that trace id, its own span id and the caller's span as parent; one without gets a new
//! trace. Log lines inside the span carry `trace_id`, `span_id` and `parent_span_id` (JSON logs
//! put them under `span`), and the LLM calls made for it send a `traceparent` naming this span
//! as their parent. Embedding calls do not: the batcher joins texts of several events and
//! requests into one call, which cannot have several parents. With `telemetry.otlp.endpoint`
//! set, each span is exported over OTLP as it ends (`otlp`), with these ids.

use std::future::Future;

/// The NATS (and HTTP) header name.
pub const TRACEPARENT: &str = "traceparent";

/// One position in a trace: the trace, the span and its sampling flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// 32 lowercase hex digits, not all zero.
    pub trace_id: String,
    /// 16 lowercase hex digits, not all zero: the span this context names.
    pub span_id: String,
    /// The `trace-flags` byte (bit 0: sampled).
    pub flags: u8,
}

impl TraceContext {
    /// Parses a `traceparent` value (W3C Trace Context, level 1). Anything invalid is `None`,
    /// as the spec asks: the receiver then starts a new trace.
    pub fn parse(value: &str) -> Option<TraceContext> {
        let value = value.trim();
        // version "-" trace-id "-" parent-id "-" trace-flags: 55 characters; a later version
        // may append fields after another "-".
        let head = value.get(..55)?;
        let mut parts = head.split('-');
        let (version, trace_id, span_id, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let lower_hex = |s: &str, len: usize| {
            s.len() == len
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        if !(lower_hex(version, 2)
            && lower_hex(trace_id, 32)
            && lower_hex(span_id, 16)
            && lower_hex(flags, 2))
        {
            return None;
        }
        let rest = &value[55..];
        let valid_length = match version {
            "ff" => false,
            "00" => rest.is_empty(),
            _ => rest.is_empty() || rest.starts_with('-'),
        };
        let all_zero = |s: &str| s.bytes().all(|b| b == b'0');
        if !valid_length || all_zero(trace_id) || all_zero(span_id) {
            return None;
        }
        Some(TraceContext {
            trace_id: trace_id.to_string(),
            span_id: span_id.to_string(),
            flags: u8::from_str_radix(flags, 16).ok()?,
        })
    }

    /// The context in a message's `traceparent` header, if it has a valid one.
    pub fn from_headers(headers: Option<&async_nats::HeaderMap>) -> Option<TraceContext> {
        TraceContext::parse(headers?.get(TRACEPARENT)?.as_str())
    }

    /// A new trace (sampled), for work that arrived without one.
    pub fn new_root() -> TraceContext {
        TraceContext {
            trace_id: uuid::Uuid::new_v4().simple().to_string(),
            span_id: new_span_id(),
            flags: 1,
        }
    }

    /// A new span in the same trace, with the same flags.
    pub fn child(&self) -> TraceContext {
        TraceContext {
            trace_id: self.trace_id.clone(),
            span_id: new_span_id(),
            flags: self.flags,
        }
    }

    /// The `traceparent` value naming this span (version 00).
    pub fn header_value(&self) -> String {
        format!("00-{}-{}-{:02x}", self.trace_id, self.span_id, self.flags)
    }
}

fn new_span_id() -> String {
    // 8 random bytes from a v4 UUID's 122 random bits; never all zero in practice, and
    // replaced if it were.
    let id = uuid::Uuid::new_v4().simple().to_string()[..16].to_string();
    if id.bytes().all(|b| b == b'0') {
        return "0000000000000001".into();
    }
    id
}

tokio::task_local! {
    static CURRENT: TraceContext;
}

/// The span of the work this task is doing, for outgoing calls to name as their parent.
pub fn current() -> Option<TraceContext> {
    CURRENT.try_with(TraceContext::clone).ok()
}

/// What a span is the work of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// A conversation event the worker consumed.
    Event,
    /// A request the service answered, by endpoint name.
    Request(&'static str),
}

impl Work {
    fn name(self) -> &'static str {
        match self {
            Work::Event => "ingest",
            Work::Request(endpoint) => endpoint,
        }
    }
}

/// Runs `work` as a new span of `incoming`'s trace (or of a new trace), inside a tracing span
/// named `traced` that carries the ids, with [`current`] answering that span. When spans are
/// exported (`otlp`), the span is recorded as it ends.
pub async fn in_span<F: Future>(what: Work, incoming: Option<TraceContext>, work: F) -> F::Output {
    use tracing::Instrument;
    let (context, parent_span_id) = match incoming {
        Some(parent) => (parent.child(), parent.span_id),
        None => (TraceContext::new_root(), String::new()),
    };
    let span = tracing::info_span!(
        "traced",
        work = what.name(),
        trace_id = %context.trace_id,
        span_id = %context.span_id,
        parent_span_id = %parent_span_id,
    );
    let start = std::time::SystemTime::now();
    let exported = crate::otlp::enabled().then(|| context.clone());
    let output = CURRENT.scope(context, work.instrument(span)).await;
    if let Some(context) = exported {
        crate::otlp::record(crate::otlp::FinishedSpan {
            trace_id: context.trace_id,
            span_id: context.span_id,
            parent_span_id: (!parent_span_id.is_empty()).then_some(parent_span_id),
            flags: context.flags,
            name: match what {
                Work::Event => "ingest.event".into(),
                Work::Request(endpoint) => format!("serve.{endpoint}"),
            },
            kind: match what {
                Work::Event => opentelemetry::trace::SpanKind::Consumer,
                Work::Request(_) => opentelemetry::trace::SpanKind::Server,
            },
            start,
            end: std::time::SystemTime::now(),
        });
    }
    output
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_values_are_parsed_as_the_w3c_spec_says() {
        let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
        let span = "00f067aa0ba902b7";
        let cases: &[(&str, Option<u8>)] = &[
            // The spec's example, sampled and not.
            (&format!("00-{trace}-{span}-01"), Some(1)),
            (&format!("00-{trace}-{span}-00"), Some(0)),
            // Surrounding whitespace is tolerated.
            (&format!(" 00-{trace}-{span}-01 "), Some(1)),
            // A later version may append fields; version 00 may not.
            (&format!("01-{trace}-{span}-01-extra"), Some(1)),
            (&format!("00-{trace}-{span}-01-extra"), None),
            (&format!("01-{trace}-{span}-01extra"), None),
            // Version ff is forbidden.
            (&format!("ff-{trace}-{span}-01"), None),
            // All-zero ids are invalid.
            (&format!("00-{}-{span}-01", "0".repeat(32)), None),
            (&format!("00-{trace}-{}-01", "0".repeat(16)), None),
            // Upper case, wrong lengths, missing parts, garbage.
            (&format!("00-{}-{span}-01", trace.to_uppercase()), None),
            (&format!("00-{}-{span}-01", &trace[1..]), None),
            (&format!("00-{trace}-{span}"), None),
            (&format!("00-{trace}-{span}-0g"), None),
            ("", None),
            ("not a traceparent", None),
        ];
        for (value, flags) in cases {
            let parsed = TraceContext::parse(value);
            assert_eq!(parsed.as_ref().map(|c| c.flags), *flags, "{value:?}");
            if let Some(context) = parsed {
                assert_eq!(context.trace_id, trace);
                assert_eq!(context.span_id, span);
            }
        }
    }

    #[test]
    fn a_child_keeps_the_trace_and_flags_with_a_new_span() {
        let parent =
            TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap();
        let child = parent.child();
        assert_eq!(child.trace_id, parent.trace_id);
        assert_eq!(child.flags, 0);
        assert_ne!(child.span_id, parent.span_id);
        assert_eq!(TraceContext::parse(&child.header_value()), Some(child));
        let root = TraceContext::new_root();
        assert_eq!(TraceContext::parse(&root.header_value()), Some(root));
    }

    #[tokio::test]
    async fn the_current_context_is_the_span_in_progress() {
        assert_eq!(current(), None);
        let incoming =
            TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        let inside = in_span(Work::Request("test"), incoming.clone(), async { current() }).await;
        let inside = inside.expect("a context inside the span");
        assert_eq!(inside.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_ne!(inside.span_id, incoming.unwrap().span_id);
        let fresh = in_span(Work::Request("test"), None, async { current() })
            .await
            .unwrap();
        assert_ne!(fresh.trace_id, inside.trace_id);
    }
}
