//! Combinations: which signals together make a text an attack on the model, and how bad.
//!
//! The principle: a directive (an imperative or an obligation) aimed at the model (naming it,
//! "your answer", role or AI markup, an override, a label) is the core; the danger grows with
//! what it makes the model do: act toward an outside destination, touch a credential or a
//! sensitive file, change privilege or safety, hide something from the user, stop the task, or
//! steer away from other tools. Benign text is full of directives (tool descriptions are
//! directives), but they are aimed at the reader or at the use of this tool, and seldom come
//! with framing, overrides, secrecy or foreign destinations.
//!
//! A single signal is `low`: context for the audit, never an alert. Real servers' descriptions
//! and ordinary results carry one often enough ("the assistant must let the user know").

use super::Kind;
use super::signals::{Signal, Signal::*, Signals};
use crate::inspect::{Category, Severity};

/// One combination that held, the strongest of a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Combination {
    /// The finding's rule id after `intent.`.
    pub id: &'static str,
    pub severity: Severity,
    pub aim: Aim,
    /// The signals that make it hold, in the order they explain it; the first one found is
    /// the finding's span.
    pub because: &'static [Signal],
}

/// What a combination does to the model, which names the finding's category.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Aim {
    /// Instructions to the model: `hidden_instructions`.
    Instruct,
    /// Steering the model's choice of tools: `tool_manipulation`.
    Steer,
}

impl Aim {
    pub(crate) fn category(self) -> Category {
        match self {
            Self::Instruct => Category::HiddenInstructions,
            Self::Steer => Category::ToolManipulation,
        }
    }
}

const fn c(id: &'static str, severity: Severity, because: &'static [Signal]) -> Combination {
    Combination {
        id,
        severity,
        aim: Aim::Instruct,
        because,
    }
}

const fn steer(id: &'static str, severity: Severity, because: &'static [Signal]) -> Combination {
    Combination {
        id,
        severity,
        aim: Aim::Steer,
        because,
    }
}

const DIRECTIVES: &[Signal] = &[
    DirectiveToModel,
    FramedDirective,
    AddressedDirective,
    LabelledDirective,
];
const FRAMING: &[Signal] = &[Markup, AiLabel, HtmlComment, HiddenFromHumans];
/// What makes a directive consequential: it acts outside the conversation or against the
/// user.
const CONSEQUENCES: &[Signal] = &[
    ActToDestination,
    ActOnSensitive,
    Privilege,
    StopTask,
    Secrecy,
];

/// The strongest combination that holds for a tool result (or any text the model reads as
/// data), if any.
pub(crate) fn judge(g: &Signals, kind: Kind) -> Option<Combination> {
    match kind {
        Kind::Output => output(g),
        Kind::Definition => definition(g),
    }
}

fn output(g: &Signals) -> Option<Combination> {
    use Severity::{Critical, High, Low};
    let framed = g.any(FRAMING);
    let consequential = g.any(CONSEQUENCES);
    let aggravated = consequential
        || g.any(&[
            CasedAuthority,
            Authority,
            Override,
            TaskReference,
            SequencedTool,
            LabelledDirective,
        ]);
    let rules: [(bool, Combination); 21] = [
        (
            g.has(Override) && (g.any(DIRECTIVES) || g.any(&[Imperative, Privilege])),
            c(
                "override_directive",
                Critical,
                &[
                    Override,
                    DirectiveToModel,
                    FramedDirective,
                    AddressedDirective,
                    LabelledDirective,
                    Imperative,
                    Privilege,
                ],
            ),
        ),
        (
            g.has(Secrecy)
                && g.any(&[
                    DirectiveToModel,
                    FramedDirective,
                    ActToDestination,
                    ActOnSensitive,
                    Imperative,
                ]),
            c(
                "secret_from_user",
                Critical,
                &[
                    Secrecy,
                    DirectiveToModel,
                    FramedDirective,
                    ActToDestination,
                    ActOnSensitive,
                    Imperative,
                ],
            ),
        ),
        (
            g.any(&[FramedDirective, AddressedDirective]) && consequential,
            c(
                "aimed_directive_with_consequence",
                Critical,
                &[
                    FramedDirective,
                    AddressedDirective,
                    ActToDestination,
                    ActOnSensitive,
                    Privilege,
                    StopTask,
                    Secrecy,
                ],
            ),
        ),
        (
            g.any(&[DirectsToForeignTool, DirectsToSessionTool])
                && g.any(&[
                    ActToDestination,
                    ActOnSensitive,
                    DirectiveToModel,
                    FramedDirective,
                    AddressedDirective,
                ]),
            steer(
                "directs_to_session_tool",
                High,
                &[
                    DirectsToForeignTool,
                    DirectsToSessionTool,
                    ActToDestination,
                    ActOnSensitive,
                    DirectiveToModel,
                    FramedDirective,
                    AddressedDirective,
                ],
            ),
        ),
        (g.has(Override), c("override", High, &[Override])),
        (
            g.has(AnnouncedTask),
            c(
                "announced_task",
                High,
                &[
                    AnnouncedTask,
                    SupersedesOthers,
                    InstructionAnnounce,
                    WhatFollows,
                    Authority,
                    Urgency,
                ],
            ),
        ),
        (
            // "You are about to receive new instructions, mission-critical": a task switch
            // announced to the reader with urgency, whatever task follows.
            g.has(UrgentAnnouncement)
                || g.has(InstructionAnnounce)
                    && g.any(&[Authority, CasedAuthority])
                    && g.any(&[You, Imperative, Obligation]),
            c(
                "announced_task_switch",
                High,
                &[
                    UrgentAnnouncement,
                    InstructionAnnounce,
                    Authority,
                    CasedAuthority,
                    You,
                ],
            ),
        ),
        (
            g.has(FakeTurn),
            c("directive_in_fake_turn", High, &[FakeTurn, RoleTurn]),
        ),
        (
            g.has(HiddenFromHumans)
                && g.any(&[
                    Imperative,
                    Obligation,
                    OutputDirective,
                    AddressedModel,
                    Authority,
                    CasedAuthority,
                ]),
            c(
                "hidden_from_humans",
                High,
                &[
                    HiddenFromHumans,
                    Imperative,
                    Obligation,
                    OutputDirective,
                    AddressedModel,
                    Authority,
                    CasedAuthority,
                ],
            ),
        ),
        (
            // A role tag or bracket (<instruction>, [system]) with authority claims; a line
            // that starts "System:" is also how logs are written, and needs a directive.
            g.any(&[CasedAuthority, Authority])
                && (g.has(TagMarkup)
                    || g.has(Markup)
                        && g.any(&[
                            Imperative,
                            Obligation,
                            OutputDirective,
                            Promotion,
                            SelfPraise,
                        ])),
            c(
                "authority_in_markup",
                High,
                &[
                    TagMarkup,
                    Markup,
                    CasedAuthority,
                    Authority,
                    Imperative,
                    Obligation,
                    OutputDirective,
                    Promotion,
                ],
            ),
        ),
        (
            g.has(InstructionAnnounce) && g.any(&[Imperative, DirectiveToModel, LabelledDirective]),
            c(
                "announced_instructions",
                High,
                &[
                    InstructionAnnounce,
                    Imperative,
                    DirectiveToModel,
                    LabelledDirective,
                ],
            ),
        ),
        (
            g.has(AgainstOtherTools) && g.any(&[Imperative, Obligation]),
            steer(
                "against_other_tools",
                High,
                &[AgainstOtherTools, Imperative, Obligation],
            ),
        ),
        (
            g.has(FramedDirective),
            c(
                "directive_in_markup",
                High,
                &[FramedDirective, Markup, AiLabel, HtmlComment],
            ),
        ),
        (
            g.has(AddressedDirective) && aggravated,
            c(
                "addressed_directive",
                High,
                &[
                    AddressedDirective,
                    AddressedModel,
                    CasedAuthority,
                    Authority,
                    TaskReference,
                    SequencedTool,
                    LabelledDirective,
                ],
            ),
        ),
        (
            g.has(LabelledAct)
                && g.any(&[
                    ActToDestination,
                    ActOnSensitive,
                    TaskReference,
                    Destination,
                    Obligation,
                ]),
            c(
                "labelled_directive",
                High,
                &[
                    LabelledAct,
                    ActToDestination,
                    ActOnSensitive,
                    TaskReference,
                    Destination,
                    Obligation,
                ],
            ),
        ),
        (
            g.has(OutputDirective),
            c("directive_about_answer", High, &[OutputDirective]),
        ),
        (
            framed && g.has(Privilege),
            c(
                "privilege_in_markup",
                High,
                &[Privilege, Markup, AiLabel, HtmlComment],
            ),
        ),
        (
            g.has(ActOnSensitive)
                && g.any(&[
                    CasedAuthority,
                    Authority,
                    FramedDirective,
                    AddressedDirective,
                ]),
            c(
                "credential_request",
                High,
                &[
                    ActOnSensitive,
                    CasedAuthority,
                    Authority,
                    FramedDirective,
                    AddressedDirective,
                ],
            ),
        ),
        (
            g.has(CodeIntoOutput),
            c("code_into_answer", High, &[CodeIntoOutput]),
        ),
        (
            g.has(HijackToDestination),
            c(
                "task_hijack",
                High,
                &[HijackToDestination, ActToDestination, TaskReference],
            ),
        ),
        (
            framed
                || g.any(&[
                    AddressedDirective,
                    Secrecy,
                    Privilege,
                    StopTask,
                    YourOutput,
                    DirectiveToModel,
                    ActOnSensitive,
                    LabelledDirective,
                    DirectsToSessionTool,
                ]),
            c(
                "aimed_at_model",
                Low,
                &[
                    Markup,
                    AiLabel,
                    HtmlComment,
                    AddressedDirective,
                    Secrecy,
                    Privilege,
                    StopTask,
                    YourOutput,
                    DirectiveToModel,
                    ActOnSensitive,
                    LabelledDirective,
                    DirectsToSessionTool,
                ],
            ),
        ),
    ];
    rules.into_iter().find(|(holds, _)| *holds).map(|(_, c)| c)
}

fn definition(g: &Signals) -> Option<Combination> {
    use Severity::{Critical, High, Low};
    // Tags and brackets, not the "Instructions:" lines descriptions are written with.
    let framed = g.any(&[TagMarkup, AiLabel, HtmlComment, HiddenFromHumans]);
    // A second signal that turns telling the user something, or naming another server's
    // tool, from a normal cross-reference into manipulation. Capitals are not one: real
    // servers write IMPORTANT and MUST all over their descriptions.
    let manipulative = g.any(&[
        Promotion,
        Secrecy,
        ActOnSensitiveFile,
        Redirect,
        AgainstOtherTools,
    ]);
    let rules: [(bool, Combination); 16] = [
        (
            g.has(Override) && (framed || g.any(&[Privilege, CasedAuthority, DirectiveToModel])),
            c(
                "override_directive",
                Critical,
                &[
                    Override,
                    Markup,
                    AiLabel,
                    HtmlComment,
                    Privilege,
                    CasedAuthority,
                    DirectiveToModel,
                ],
            ),
        ),
        (
            g.has(Secrecy)
                && g.any(&[
                    DirectiveToModel,
                    ActOnSensitive,
                    ActToDestination,
                    Obligation,
                    Imperative,
                ]),
            c(
                "secret_from_user",
                Critical,
                &[
                    Secrecy,
                    DirectiveToModel,
                    ActOnSensitive,
                    ActToDestination,
                    Obligation,
                    Imperative,
                ],
            ),
        ),
        (
            framed && g.any(&[Privilege, Override]),
            c(
                "privilege_in_markup",
                Critical,
                &[Markup, AiLabel, HtmlComment, Privilege, Override],
            ),
        ),
        (
            g.any(&[FramedDirective, AddressedDirective])
                && g.any(&[
                    ActToDestination,
                    ActOnSensitive,
                    ActOnSensitiveFile,
                    Privilege,
                    Secrecy,
                ]),
            c(
                "aimed_directive_with_consequence",
                Critical,
                &[
                    FramedDirective,
                    AddressedDirective,
                    ActToDestination,
                    ActOnSensitive,
                    ActOnSensitiveFile,
                    Privilege,
                    Secrecy,
                ],
            ),
        ),
        (
            g.has(ActOnSensitiveFile) && g.any(&[Obligation, SequencedTool, DirectiveToModel]),
            c(
                "sensitive_file_directive",
                Critical,
                &[
                    ActOnSensitiveFile,
                    SensitiveFile,
                    Obligation,
                    SequencedTool,
                    DirectiveToModel,
                ],
            ),
        ),
        (
            g.has(DirectsToForeignTool) && (manipulative || g.has(TellUser)),
            steer(
                "directs_to_other_servers_tool",
                High,
                &[
                    DirectsToForeignTool,
                    TellUser,
                    Promotion,
                    Secrecy,
                    ActOnSensitiveFile,
                    Redirect,
                    AgainstOtherTools,
                ],
            ),
        ),
        (
            g.has(TellUser)
                && g.any(&[SequencedTool, DirectiveToModel, Obligation])
                && manipulative,
            steer(
                "dictates_what_user_hears",
                High,
                &[
                    TellUser,
                    SequencedTool,
                    DirectiveToModel,
                    Obligation,
                    Promotion,
                    Secrecy,
                    Redirect,
                ],
            ),
        ),
        (
            // Sequencing with the server's own tools is how descriptions are written, tags or
            // not; in markup, an address to the model or a hijack of its task is not.
            g.has(FramedDirective) && g.any(&[TaskHijack, AddressedModel]),
            c(
                "directive_in_markup",
                High,
                &[
                    FramedDirective,
                    TagMarkup,
                    AiLabel,
                    HtmlComment,
                    TaskHijack,
                    AddressedModel,
                ],
            ),
        ),
        (
            // Servers address the model about their own tools ("Note to LLM: call X first");
            // putting something before the model's task is another matter.
            g.all(&[AddressedDirective, TaskHijack]),
            c(
                "addressed_directive",
                High,
                &[AddressedDirective, AddressedModel, TaskHijack],
            ),
        ),
        (
            g.has(SelfPraise),
            steer("self_promotion", High, &[SelfPraise]),
        ),
        (
            // "Requests are redirected to the login page. Note: ..." is documentation; a
            // redirection announced in capitals or a role tag is a notice to the model.
            g.has(Redirect) && g.any(&[CasedAuthority, TagMarkup]),
            c(
                "announced_redirection",
                High,
                &[Redirect, CasedAuthority, TagMarkup],
            ),
        ),
        (
            g.has(AgainstOtherTools),
            steer("against_other_tools", High, &[AgainstOtherTools]),
        ),
        (
            g.promotions >= 3 || (g.has(CasedAuthority) && g.promotions >= 2),
            steer("self_promotion", High, &[Promotion, CasedAuthority]),
        ),
        (
            // A privilege a tool needs ("IMPORTANT: requires admin access") is documentation,
            // and so are capitals in a tag (`<IMPORTANT>`); a privilege the model is told to
            // take is not.
            g.has(Override) || g.all(&[Privilege, DirectiveToModel]),
            c(
                "override",
                High,
                &[
                    Override,
                    Markup,
                    AiLabel,
                    HtmlComment,
                    Privilege,
                    CasedAuthority,
                    DirectiveToModel,
                ],
            ),
        ),
        (
            // "You must provide your API key" is how a tool asks for its credential: context,
            // not an alert.
            g.all(&[ActOnSensitive, DirectiveToModel]),
            c(
                "credential_directive",
                Low,
                &[ActOnSensitive, DirectiveToModel],
            ),
        ),
        (
            g.any(&[
                Promotion,
                OtherTools,
                Privilege,
                Markup,
                AiLabel,
                ActOnSensitiveFile,
                Secrecy,
                HtmlComment,
            ]) || g.all(&[AddressedModel, DirectiveToModel])
                || g.any(&[DirectsToForeignTool, TellUser])
                    && g.any(&[SequencedTool, DirectiveToModel, Obligation]),
            c(
                "aimed_at_model",
                Low,
                &[
                    Promotion,
                    OtherTools,
                    Privilege,
                    Markup,
                    AiLabel,
                    ActOnSensitiveFile,
                    Secrecy,
                    HtmlComment,
                    DirectiveToModel,
                    DirectsToForeignTool,
                    TellUser,
                ],
            ),
        ),
    ];
    rules.into_iter().find(|(holds, _)| *holds).map(|(_, c)| c)
}
