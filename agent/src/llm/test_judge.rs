//! The judge the dialect tests use: it blocks every unreadable call and the names it is
//! given, and remembers each call it was asked about.

use super::{Arguments, Judge, Judgement, ToolCall};

/// The reason a listed name is blocked with.
pub const DENIED: &str = "denied by the test policy";

pub struct TestJudge {
    blocked: Vec<&'static str>,
    /// Every call judged, in order.
    pub seen: Vec<ToolCall>,
    /// Provider-side servers' calls judged before the agent may approve them, by label.
    pub asked: Vec<(String, ToolCall)>,
    /// Provider-side servers' calls told as made, by label.
    pub ran: Vec<(String, ToolCall)>,
}

impl TestJudge {
    pub fn blocking(names: &[&'static str]) -> Self {
        Self {
            blocked: names.to_vec(),
            seen: Vec::new(),
            asked: Vec::new(),
            ran: Vec::new(),
        }
    }

    pub fn allowing() -> Self {
        Self::blocking(&[])
    }
}

impl Judge for TestJudge {
    fn judge(&mut self, call: &ToolCall) -> Judgement {
        self.seen.push(call.clone());
        match &call.arguments {
            Arguments::Unreadable(why) => Judgement::Block {
                reason: format!("unreadable arguments: {why}"),
            },
            Arguments::Object(_) if self.blocked.contains(&call.name.as_str()) => {
                Judgement::Block {
                    reason: DENIED.to_owned(),
                }
            }
            Arguments::Object(_) => Judgement::Allow,
        }
    }

    fn judge_provider_call(&mut self, server_label: &str, call: &ToolCall) -> Judgement {
        self.asked.push((server_label.to_owned(), call.clone()));
        let judgement = self.judge(call);
        self.seen.pop();
        judgement
    }

    fn ran_at_provider(&mut self, server_label: &str, call: &ToolCall) {
        self.ran.push((server_label.to_owned(), call.clone()));
    }
}
