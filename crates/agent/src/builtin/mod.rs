//! The built-in agent (issue 5): real data questions answered over the
//! bundled public statistics, deterministically and offline.
//!
//! Owns: the turn flows (question → plan or clarifying question; approve →
//! steps, component, Markdown answer, suggestions, done; amend, reject;
//! card edits, follow-ups and canvas questions) and the service traits the
//! flows use. Must never: keep state between segments (everything is
//! rebuilt from the [`TurnContext`]: the question, the answered pauses,
//! the plan's step args, the component ids), sleep, or touch I/O.

pub mod assumptions;
pub mod card;
pub mod clarify;
pub mod data;
pub mod planner;
pub mod present;
pub mod seeded;
pub mod seeds;
pub mod sentences;
pub mod switching;
pub mod understand;
pub mod words;

use std::sync::Arc;

use serde_json::json;

use super::frames::{done, message_complete as text, message_delta as delta};
use super::{Agent, AnsweredPause, SegmentFrames, TurnContext};
use clarify::{apply_recommended, elicitation, picks_from};
use data::{Dataset, Indicator};
use ledgerwire_wire::frame::{
    ActivityStep, ComponentCreated, ComponentRevised, Frame, StepStatus, Suggestions,
};
use ledgerwire_wire::ids::{ActivityStepId, ComponentId, PlanVersionId};
use ledgerwire_wire::plan::{PlanProposed, PlanVersioned, SwitchFailed};
use ledgerwire_wire::request::{ComponentIntent, Decision, PlanSwitch, Surface};
use planner::{Picks, Query, Resolution, id};
use present::Outcome;
use seeded::{seed_frames, seeded};
use seeds::{ResolveDefinition, SeedNode, SeedOutcome};
use understand::{EditWords, Reference, Understanding, understand};

/// Newest canvas blocks the canvas digest reads (the contract's bound).
pub const CANVAS_DIGEST_BLOCKS: usize = 16;

/// Catalogue search: which indicators a text names, and what a seed's
/// identity resolves to (the `resolve_definition` role).
pub trait CatalogueSearch: ResolveDefinition + Send + Sync {
    fn search(&self, text: &str) -> Vec<Indicator>;
}

/// The data service: computes an approved query.
pub trait DataService: Send + Sync {
    fn compute(&self, query: &Query) -> Option<Outcome>;
}

/// The presentation service: component envelopes and fact summaries.
pub trait PresentationService: Send + Sync {
    fn created(
        &self,
        query: &Query,
        outcome: &Outcome,
        component_id: ComponentId,
    ) -> ComponentCreated;
}

/// The in-process implementations of the three services over the bundled data.
#[derive(Clone, Copy, Debug, Default)]
pub struct Bundled;

impl CatalogueSearch for Bundled {
    fn search(&self, text: &str) -> Vec<Indicator> {
        understand(text)
            .indicators
            .into_iter()
            .flat_map(|m| m.indicators)
            .collect()
    }
}

impl ResolveDefinition for Bundled {
    fn resolve_definition(
        &self,
        spec_id: &str,
        definition: &serde_json::Value,
    ) -> seeds::Resolution {
        seeds::resolve_bundled(Dataset::bundled(), spec_id, definition)
    }
}

impl DataService for Bundled {
    fn compute(&self, query: &Query) -> Option<Outcome> {
        present::compute(Dataset::bundled(), query)
    }
}

impl PresentationService for Bundled {
    fn created(
        &self,
        query: &Query,
        outcome: &Outcome,
        component_id: ComponentId,
    ) -> ComponentCreated {
        let data = Dataset::bundled();
        let title = sentences::title(data, query);
        ComponentCreated {
            seq: 0,
            payload: present::envelope(
                query,
                outcome,
                query.chart,
                component_id.as_str(),
                1,
                &title,
            ),
            component_id,
            revision: 1,
            component_type: query.chart.component_type().to_owned(),
            title,
            fact_summary: present::fact_summary(data, query, outcome),
            provenance: present::provenance(query),
        }
    }
}

/// The built-in agent: the default of `serve`. Its turn flows reach the
/// catalogue, the data and the presentation only through the three
/// service traits ([`Bundled`] by default); the planner and the sentences
/// read the bundled dataset's metadata (names, types, years) directly.
#[derive(Clone)]
pub struct BuiltinAgent {
    search: Arc<dyn CatalogueSearch>,
    data: Arc<dyn DataService>,
    present: Arc<dyn PresentationService>,
}

impl Default for BuiltinAgent {
    fn default() -> Self {
        Self::with_services(Arc::new(Bundled), Arc::new(Bundled), Arc::new(Bundled))
    }
}

impl BuiltinAgent {
    /// The agent over other implementations of its services.
    pub fn with_services(
        search: Arc<dyn CatalogueSearch>,
        data: Arc<dyn DataService>,
        present: Arc<dyn PresentationService>,
    ) -> Self {
        Self {
            search,
            data,
            present,
        }
    }
}

fn suggestions(items: Vec<String>) -> Frame {
    Frame::Suggestions(Suggestions {
        seq: 0,
        suggestions: items,
    })
}

/// An `activity.step` frame; a failure carries its code and the code's
/// sentence.
pub(super) fn activity(
    id: &str,
    status: StepStatus,
    tool: &str,
    label: &str,
    failure: Option<&str>,
) -> Frame {
    Frame::ActivityStep(ActivityStep {
        seq: 0,
        step_id: id!(ActivityStepId, "{id}"),
        status,
        tool: tool.to_owned(),
        label: label.to_owned(),
        detail: failure.map(|code| failure_detail(code).to_owned()),
        code: failure.map(str::to_owned),
    })
}

/// Step `n` of a run (`step-<n>`).
fn step(n: usize, status: StepStatus, tool: &str, label: &str, failure: Option<&str>) -> Frame {
    activity(&format!("step-{n}"), status, tool, label, failure)
}

/// One sentence per failure code.
fn failure_detail(code: &str) -> &'static str {
    match code {
        seeds::SEED_INVALID => {
            "This dataset from Search could not be read within its bounds, so it is not used."
        }
        seeds::IDENTITY_MISMATCH => {
            "This dataset's id and its definition name different datasets, so it is not used."
        }
        seeds::SEED_DUPLICATE => {
            "An earlier dataset from Search is the same one, so this copy is not used."
        }
        seeds::SEED_DROPPED => "Search no longer resolves this dataset; search for it again.",
        seeds::SERVICE_UNAVAILABLE => {
            "Search could not be reached for this dataset; try again shortly."
        }
        seeds::SEED_REFERENCE_UNUSED => {
            "A dataset reference carries nothing to start from, so the turn runs from your question."
        }
        "partial_data" => "Some places have no figures in these years, so they are left out.",
        "no_data" => "The data holds no figures for this question, so nothing could be computed.",
        "no_input" => "An earlier step produced nothing to work on.",
        _ => "This step could not be completed.",
    }
}

fn closing(message: String, chips: Vec<String>) -> Vec<Frame> {
    vec![text(message), suggestions(chips), done()]
}

/// The query a component id carries (`cmp-<turn>-<n>|<code>`).
fn query_of_component(id: &str) -> Option<Query> {
    Query::from_code(id.split_once('|')?.1)
}

/// (turn, n) of a component id this agent minted.
fn component_order(id: &str) -> (u32, u32) {
    let head = id.split('|').next().unwrap_or_default();
    let mut parts = head.split('-').skip(1).map(|p| p.parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// "The country I mentioned": the places of the newest earlier message
/// that named any, read from the conversation digest and, past its
/// bounds, through the recall tool. With an indicator in the
/// question itself, the reference is then settled without a card.
fn recall_places(mut u: Understanding, context: &TurnContext) -> Understanding {
    if u.reference != Some(Reference::MentionedPlace) || !u.places.is_empty() {
        return u;
    }
    let named = |turns: &[super::PastTurn]| {
        turns
            .iter()
            .map(|past| understand(&past.message).places)
            .find(|places| !places.is_empty())
    };
    let mut recalled = named(&context.history);
    // Past the digest: page back through the recall tool while calls last.
    let mut before = context.history.last().map_or(context.turn, |p| p.turn);
    while recalled.is_none() {
        let Ok(page) = context.recall.before(before) else {
            break;
        };
        let Some(oldest) = page.last() else {
            break;
        };
        before = oldest.turn;
        recalled = named(&page);
    }
    if let Some(places) = recalled {
        u.places = places;
        if !u.indicators.is_empty() {
            u.reference = None;
        }
    }
    u
}

/// A new version of `plan` for `query`: a note, `plan.versioned` naming
/// the plan it replaces, and the new `plan.proposed`.
fn replanned(
    context: &TurnContext,
    plan: &PlanProposed,
    query: &Query,
    note: String,
    ask: &str,
) -> Vec<Frame> {
    let version = plan.version + 1;
    vec![
        delta(note),
        Frame::PlanVersioned(PlanVersioned {
            seq: 0,
            plan_version_id: id!(PlanVersionId, "pv-{}-{version}", context.turn),
            version,
            supersedes: plan.plan_version_id.clone(),
        }),
        Frame::PlanProposed(planner::plan_frame(
            Dataset::bundled(),
            query,
            context.turn,
            version,
            ask,
        )),
    ]
}

/// "I don't know a place called …" when the question seems to name a
/// place the data lacks and the plan falls back to a default.
fn unknown_place_note(data: &Dataset, u: &Understanding, query: &Query) -> String {
    match &u.unknown_place {
        Some(word) if u.places.is_empty() => format!(
            "I don't know a place called “{word}” in the bundled data, so this plan covers {} instead. ",
            sentences::who(data, query)
        ),
        _ => String::new(),
    }
}

/// The newest card's query: what "the same for Uganda" refers to.
fn latest_query(context: &TurnContext) -> Option<Query> {
    context
        .components
        .keys()
        .filter_map(|id| Some((component_order(id), query_of_component(id)?)))
        .max_by_key(|(order, _)| *order)
        .map(|(_, q)| q)
}

fn component_id(turn: u32, n: u32, query: &Query) -> ComponentId {
    ComponentId::new(format!("cmp-{turn}-{n}|{}", query.code()))
        .unwrap_or_else(|_| id!(ComponentId, "cmp-{turn}-{n}"))
}

fn follow_ups(data: &Dataset, query: &Query) -> Vec<String> {
    let ind = query.indicator.name();
    let mut out = Vec::new();
    if query.level.is_none() && query.places.len() == 1 && query.places[0] != "Earth" {
        out.push(format!(
            "Compare {} with the world",
            sentences::names(data, &query.places)
        ));
    }
    if !matches!(query.operation, understand::Operation::Rank { .. }) {
        out.push(format!("Top 10 countries by {ind} in {}", query.to));
    }
    if !matches!(query.operation, understand::Operation::Forecast { .. }) && query.places.len() == 1
    {
        out.push(format!(
            "Forecast {ind} for {} to 2030",
            sentences::names(data, &query.places)
        ));
    }
    out
}

impl BuiltinAgent {
    /// A turn's first segment: the seed node when seeds were posted, then
    /// the turn itself.
    fn start(&self, context: &TurnContext) -> Vec<Frame> {
        let node = seeds::take_seeds(context.request.seed_spec.as_ref(), self.search.as_ref());
        let Some(node) = node else {
            return self.unseeded_start(context, None);
        };
        let mut frames = seed_frames(Dataset::bundled(), &node);
        frames.extend(self.unseeded_start(context, Some(&node)));
        frames
    }

    fn unseeded_start(&self, context: &TurnContext, node: Option<&SeedNode>) -> Vec<Frame> {
        let data = Dataset::bundled();
        let message = &context.request.message;
        if let Some(card) = &context.request.component_ref {
            let base = query_of_component(card.component_id.as_str());
            if card.intent == ComponentIntent::Edit {
                return self.edit(context, base);
            }
            return self.question(
                context,
                &seeded(understand(message), node),
                base.as_ref(),
                &Picks::default(),
            );
        }
        let u = seeded(recall_places(understand(message), context), node);
        if u.canvas_question {
            return canvas_answer(context);
        }
        if context.request.surface() == Surface::Download {
            return self.download(context, &u);
        }
        let base = latest_query(context);
        let base = if u.reference.is_some() { base } else { None };
        let _ = data;
        self.question(context, &u, base.as_ref(), &Picks::default())
    }

    fn question(
        &self,
        context: &TurnContext,
        u: &Understanding,
        base: Option<&Query>,
        picks: &Picks,
    ) -> Vec<Frame> {
        let data = Dataset::bundled();
        match planner::resolve(data, u, base, picks) {
            Resolution::Ready(query) => vec![
                delta(format!(
                    "{}Here is my plan: {}",
                    unknown_place_note(data, u, &query),
                    sentences::summary(data, &query)
                )),
                Frame::PlanProposed(planner::plan_frame(
                    data,
                    &query,
                    context.turn,
                    1,
                    &context.request.message,
                )),
            ],
            Resolution::Ask(asks) => vec![elicitation(&asks)],
            Resolution::Honest(message) => closing(
                message,
                vec![
                    "Life expectancy in Kenya since 1990".to_owned(),
                    "Top 10 countries by GDP per capita in 2007".to_owned(),
                ],
            ),
        }
    }

    fn download(&self, context: &TurnContext, u: &Understanding) -> Vec<Frame> {
        let data = Dataset::bundled();
        let picks = Picks::default();
        let query = match planner::resolve(data, u, None, &picks) {
            Resolution::Ready(mut q) => {
                q.chart = understand::ChartKind::Table;
                q
            }
            Resolution::Ask(asks) => {
                let mut picks = Picks::default();
                apply_recommended(self.search.as_ref(), &asks, &mut picks);
                match planner::resolve(data, u, None, &picks) {
                    Resolution::Ready(q) => q,
                    _ => return closing(planner::help_text(), Vec::new()),
                }
            }
            Resolution::Honest(message) => return closing(message, Vec::new()),
        };
        let mut frames = vec![step(
            1,
            StepStatus::Running,
            "data.fetch",
            &sentences::fetch_label(data, &query),
            None,
        )];
        match self.data.compute(&query) {
            Some(outcome) => {
                frames.push(step(
                    1,
                    StepStatus::Complete,
                    "data.fetch",
                    &sentences::fetch_label(data, &query),
                    None,
                ));
                frames.push(Frame::ComponentCreated(self.present.created(
                    &query,
                    &outcome,
                    component_id(context.turn, 1, &query),
                )));
                frames.extend(closing(
                    present::markdown(data, &query, &outcome),
                    Vec::new(),
                ));
            }
            None => {
                frames.push(step(
                    1,
                    StepStatus::Failed,
                    "data.fetch",
                    &sentences::fetch_label(data, &query),
                    Some("no_data"),
                ));
                frames.extend(closing(
                    "The data holds no figures for that, so there is nothing to download."
                        .to_owned(),
                    Vec::new(),
                ));
            }
        }
        frames
    }

    fn resume(&self, context: &TurnContext, last: &AnsweredPause) -> Vec<Frame> {
        let data = Dataset::bundled();
        match (&last.frame, last.response.decision) {
            (Frame::PlanProposed(plan), Decision::Approve) => match Query::from_plan(plan) {
                Some(query) => self.execute(context, &query),
                None => closing("I could not read the approved plan back, so I computed nothing. Please ask again.".to_owned(), Vec::new()),
            },
            (Frame::PlanProposed(plan), Decision::Amend) => match &last.response.switch {
                Some(switch) => self.switch(context, plan, switch),
                None => {
                    let amendment = last.response.payload.clone().unwrap_or_default();
                    self.amend(context, plan, &amendment)
                }
            },
            (Frame::PlanProposed(plan), _) => {
                let chips = Query::from_plan(plan).map(|q| follow_ups(data, &q)).unwrap_or_default();
                closing("You rejected the plan, so I computed nothing.".to_owned(), chips)
            }
            (Frame::ElicitationRequest(_), _) => {
                let node = seeds::take_seeds(context.request.seed_spec.as_ref(), self.search.as_ref());
                let u = seeded(understand(&context.request.message), node.as_ref());
                let base = context
                    .request
                    .component_ref
                    .as_ref()
                    .and_then(|c| query_of_component(c.component_id.as_str()))
                    .or_else(|| u.reference.and_then(|_| latest_query(context)));
                let picks = picks_from(self.search.as_ref(), context, &u, base.as_ref());
                match planner::resolve(data, &u, base.as_ref(), &picks) {
                    Resolution::Ready(query) => vec![
                        delta("Thanks, that settles it.".to_owned()),
                        Frame::PlanProposed(planner::plan_frame(data, &query, context.turn, 1, &context.request.message)),
                    ],
                    _ => closing(planner::help_text(), Vec::new()),
                }
            }
            _ => closing(planner::help_text(), Vec::new()),
        }
    }

    fn amend(&self, context: &TurnContext, plan: &PlanProposed, amendment: &str) -> Vec<Frame> {
        let data = Dataset::bundled();
        let Some(base) = Query::from_plan(plan) else {
            return closing(
                "I could not read the plan back; please ask again.".to_owned(),
                Vec::new(),
            );
        };
        let u = understand(amendment);
        let query = match planner::resolve(data, &u, Some(&base), &Picks::default()) {
            Resolution::Ready(q) => q,
            Resolution::Ask(asks) => {
                let mut picks = Picks::default();
                apply_recommended(self.search.as_ref(), &asks, &mut picks);
                match planner::resolve(data, &u, Some(&base), &picks) {
                    Resolution::Ready(q) => q,
                    _ => base.clone(),
                }
            }
            Resolution::Honest(_) => base.clone(),
        };
        let note = if query == base {
            "I could not see what to change in that, so the plan is as it was.".to_owned()
        } else {
            format!("Amended: {}", sentences::summary(data, &query))
        };
        let ask = format!("{} ({amendment})", context.request.message);
        replanned(context, plan, &query, note, &ask)
    }

    /// A switch of one choice: the plan again with the option picked, or
    /// the same plan re-offered with `switch_failed` when it cannot apply.
    fn switch(
        &self,
        context: &TurnContext,
        plan: &PlanProposed,
        switch: &PlanSwitch,
    ) -> Vec<Frame> {
        let data = Dataset::bundled();
        let Some(base) = Query::from_plan(plan) else {
            return closing(
                "I could not read the plan back; please ask again.".to_owned(),
                Vec::new(),
            );
        };
        let choice = switch.choice_id.as_str();
        match planner::switched(data, &base, choice, switch.option_id.as_str()) {
            Ok(query) => {
                let ask = plan
                    .asks
                    .iter()
                    .flatten()
                    .next()
                    .map_or_else(|| context.request.message.clone(), |a| a.ask.clone());
                let row = plan
                    .decisions
                    .iter()
                    .flatten()
                    .find(|d| d.choice_id.as_str() == choice);
                let label = row
                    .and_then(|d| d.options.iter().find(|o| o.option_id == switch.option_id))
                    .map_or(switch.option_id.as_str(), |o| o.label.as_str());
                let question = row.map_or("the choice", |d| d.question.as_str());
                let note = format!("Switched {question} to {label}.");
                replanned(context, plan, &query, note, &ask)
            }
            Err(refusal) => {
                let mut again = plan.clone();
                again.switch_failed = Some(SwitchFailed {
                    choice_id: switch.choice_id.clone(),
                    option_id: switch.option_id.clone(),
                    code: refusal.code.to_owned(),
                    reason: refusal.reason,
                    retryable: Some(false),
                });
                vec![Frame::PlanProposed(again)]
            }
        }
    }

    fn execute(&self, context: &TurnContext, query: &Query) -> Vec<Frame> {
        let data = Dataset::bundled();
        let mut frames = Vec::new();
        let fetch = sentences::fetch_label(data, query);
        let missing = planner::missing_places(data, query);
        let outcome = self.data.compute(query);
        frames.push(step(1, StepStatus::Running, "data.fetch", &fetch, None));
        let mut n = 1;
        match (&outcome, missing.is_empty()) {
            (None, _) => frames.push(step(
                1,
                StepStatus::Failed,
                "data.fetch",
                &fetch,
                Some("no_data"),
            )),
            (Some(_), false) => frames.push(step(
                1,
                StepStatus::Failed,
                "data.fetch",
                &fetch,
                Some("partial_data"),
            )),
            (Some(_), true) => {
                frames.push(step(1, StepStatus::Complete, "data.fetch", &fetch, None))
            }
        }
        if let Some(level) = query.level {
            n += 1;
            let label = sentences::keep_label(level);
            frames.push(step(n, StepStatus::Running, "data.filter", &label, None));
            frames.push(step(n, StepStatus::Complete, "data.filter", &label, None));
        }
        n += 1;
        let op = sentences::operation_label(data, query);
        frames.push(step(n, StepStatus::Running, "data.compute", &op, None));
        let Some(outcome) = outcome else {
            frames.push(step(
                n,
                StepStatus::Failed,
                "data.compute",
                &op,
                Some("no_input"),
            ));
            frames.extend(closing(
                format!(
                    "The bundled data has no {} for {} in {}, so I could not answer.",
                    query.indicator.name(),
                    sentences::who(data, query),
                    sentences::when(query)
                ),
                follow_ups(data, query),
            ));
            return frames;
        };
        frames.push(step(n, StepStatus::Complete, "data.compute", &op, None));
        n += 1;
        let draw = sentences::chart_label(query.chart);
        frames.push(step(
            n,
            StepStatus::Running,
            "present.component",
            &draw,
            None,
        ));
        frames.push(step(
            n,
            StepStatus::Complete,
            "present.component",
            &draw,
            None,
        ));
        frames.push(Frame::ComponentCreated(self.present.created(
            query,
            &outcome,
            component_id(context.turn, 1, query),
        )));
        frames.extend(closing(
            present::markdown(data, query, &outcome),
            follow_ups(data, query),
        ));
        frames
    }

    fn edit(&self, context: &TurnContext, base: Option<Query>) -> Vec<Frame> {
        let data = Dataset::bundled();
        let Some(card) = &context.request.component_ref else {
            return closing(planner::help_text(), Vec::new());
        };
        let mut frames = vec![
            step(1, StepStatus::Running, "card.read", "Read the card", None),
            step(1, StepStatus::Complete, "card.read", "Read the card", None),
        ];
        let Some(base) = base else {
            frames.extend(closing("I can only edit cards I drew, and I cannot read this one back, so I changed nothing.".to_owned(), Vec::new()));
            return frames;
        };
        let u = understand(&context.request.message);
        let revision = context
            .components
            .get(card.component_id.as_str())
            .map_or(card.revision, |c| c.revision)
            + 1;
        let mut query = base.clone();
        let mut changed = Vec::new();
        let mut title = context
            .components
            .get(card.component_id.as_str())
            .map_or_else(|| sentences::title(data, &base), |c| c.title.clone());
        match &u.edit {
            Some(EditWords::Rename(new)) => {
                title = new.clone();
                changed.push("title".to_owned());
            }
            Some(EditWords::Keep(codes)) | Some(EditWords::Remove(codes)) => {
                let outside: Vec<String> = codes
                    .iter()
                    .filter(|c| !base.places.contains(c))
                    .cloned()
                    .collect();
                if codes.is_empty() || !outside.is_empty() {
                    frames.extend(closing(
                        format!(
                            "This card holds only {}, so I cannot select {} on it; I changed nothing.",
                            sentences::who(data, &base),
                            if outside.is_empty() { "that".to_owned() } else { sentences::names(data, &outside) }
                        ),
                        Vec::new(),
                    ));
                    return frames;
                }
                let keep = matches!(u.edit, Some(EditWords::Keep(_)));
                query.places.retain(|c| codes.contains(c) == keep);
                if query.places.is_empty() {
                    frames.extend(closing(
                        "That would leave the card empty, so I changed nothing.".to_owned(),
                        Vec::new(),
                    ));
                    return frames;
                }
                changed.push("selection".to_owned());
            }
            None => {}
        }
        if changed.is_empty() {
            if let Some(chart) = u.chart {
                query.chart = chart;
            }
            match u.time {
                understand::Time::Year(y) => {
                    (query.from, query.to) = (y.min(query.to), query.to.max(y))
                }
                understand::Time::Since(y) => query.from = y,
                understand::Time::Range(a, b) => (query.from, query.to) = (a, b),
                understand::Time::Unspecified => {}
            }
            if query == base {
                frames.extend(closing("I could not see an edit I can make to this card in that, so I changed nothing.".to_owned(), Vec::new()));
                return frames;
            }
            return self.rebuild(context, frames, &query);
        }
        frames.push(step(
            2,
            StepStatus::Running,
            "card.apply",
            "Apply the edit",
            None,
        ));
        let Some(outcome) = self.data.compute(&query) else {
            frames.push(step(
                2,
                StepStatus::Failed,
                "card.apply",
                "Apply the edit",
                Some("no_data"),
            ));
            frames.extend(closing(
                "The data has nothing for that selection, so I changed nothing.".to_owned(),
                Vec::new(),
            ));
            return frames;
        };
        frames.push(step(
            2,
            StepStatus::Complete,
            "card.apply",
            "Apply the edit",
            None,
        ));
        frames.push(Frame::ComponentRevised(ComponentRevised {
            seq: 0,
            component_id: card.component_id.clone(),
            revision,
            title: title.clone(),
            changed: changed.clone(),
            payload: present::envelope(
                &query,
                &outcome,
                query.chart,
                card.component_id.as_str(),
                revision,
                &title,
            ),
            fact_summary: Some(present::fact_summary(data, &query, &outcome)),
        }));
        frames.extend(closing(
            format!(
                "I revised the card ({}). {}",
                changed.join(", "),
                present::headline(data, &query, &outcome)
            ),
            Vec::new(),
        ));
        frames
    }

    /// A type or window edit: a new component takes the card's place.
    fn rebuild(&self, context: &TurnContext, mut frames: Vec<Frame>, query: &Query) -> Vec<Frame> {
        let data = Dataset::bundled();
        frames.push(step(
            2,
            StepStatus::Running,
            "card.rebuild",
            "Rebuild the card",
            None,
        ));
        let valid_window = query.from <= query.to;
        match self.data.compute(query).filter(|_| valid_window) {
            Some(outcome) => {
                frames.push(step(
                    2,
                    StepStatus::Complete,
                    "card.rebuild",
                    "Rebuild the card",
                    None,
                ));
                frames.push(Frame::ComponentCreated(self.present.created(
                    query,
                    &outcome,
                    component_id(context.turn, 1, query),
                )));
                frames.extend(closing(
                    format!(
                        "I rebuilt the card as a new {}. {}",
                        query.chart.label().to_lowercase(),
                        present::headline(data, query, &outcome)
                    ),
                    Vec::new(),
                ));
            }
            None => {
                frames.push(step(
                    2,
                    StepStatus::Failed,
                    "card.rebuild",
                    "Rebuild the card",
                    Some("no_data"),
                ));
                frames.extend(closing(
                    "The card's data does not cover that, so I changed nothing.".to_owned(),
                    Vec::new(),
                ));
            }
        }
        frames
    }
}

fn canvas_answer(context: &TurnContext) -> Vec<Frame> {
    let blocks = context
        .canvas
        .as_ref()
        .map(|c| c.blocks.as_slice())
        .unwrap_or_default();
    if blocks.is_empty() {
        return closing(
            "Your canvas has nothing yet.".to_owned(),
            vec!["Life expectancy in Kenya since 1990".to_owned()],
        );
    }
    let newest = &blocks[blocks.len().saturating_sub(CANVAS_DIGEST_BLOCKS)..];
    let mut message = format!(
        "Your canvas holds {} card{}:\n",
        blocks.len(),
        if blocks.len() == 1 { "" } else { "s" }
    );
    for block in newest {
        message.push_str(&format!(
            "- **{}** ({}){}\n",
            block.title,
            block.component_type.replace('_', " "),
            if block.pinned { ", pinned" } else { "" }
        ));
    }
    if blocks.len() > newest.len() {
        message.push_str(&format!(
            "- and {} older cards\n",
            blocks.len() - newest.len()
        ));
    }
    closing(message, Vec::new())
}

/// The built-in agent's behaviour version: bump it whenever the frames it
/// yields for the same context change (recorded with every segment).
pub const BEHAVIOUR_VERSION: &str = "2026-12-07";

impl Agent for BuiltinAgent {
    fn identity(&self) -> crate::AgentIdentity {
        crate::AgentIdentity::new("builtin", BEHAVIOUR_VERSION)
    }

    fn segment(&self, context: TurnContext) -> SegmentFrames {
        let frames = match context.answers.last() {
            None => self.start(&context),
            Some(last) => self.resume(&context, last),
        };
        let _ = json!(null);
        Box::pin(futures_util::stream::iter(frames))
    }
}

/// Runs one segment synchronously and returns its frames (benches, tests).
pub fn segment_frames(context: &TurnContext) -> Vec<Frame> {
    match context.answers.last() {
        None => BuiltinAgent::default().start(context),
        Some(last) => BuiltinAgent::default().resume(context, last),
    }
}
