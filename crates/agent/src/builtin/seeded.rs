//! What a turn's seeds from Search do to it (delta 18): the seed node's
//! frames (a step per seed, the seeds step, the first message listing
//! them) and the question as the kept seeds settle it.
//!
//! Must never: fetch data or decide which seeds are kept (the `seeds`
//! node does); it reports and applies that node's outcome.
//! Owns: the seed node's frames and the question the kept seeds settle.

use super::*;

/// A step of the seed node (`seed-<n>` or `seeds`).
fn seed_step(id: &str, status: StepStatus, label: &str, failure: Option<&str>) -> Frame {
    activity(id, status, "search.seed", label, failure)
}

/// The seed node's frames: a step per seed, the seeds step counting the
/// kept ones, and the turn's first message listing them (delta 18).
pub(super) fn seed_frames(data: &Dataset, node: &SeedNode) -> Vec<Frame> {
    let outcomes = match node {
        SeedNode::Reference { spec_id } => {
            let label = format!("Dataset {spec_id} from Search");
            return vec![
                seed_step("seed-1", StepStatus::Running, &label, None),
                seed_step(
                    "seed-1",
                    StepStatus::Failed,
                    &label,
                    Some(seeds::SEED_REFERENCE_UNUSED),
                ),
            ];
        }
        SeedNode::Seeds(outcomes) => outcomes,
    };
    let mut frames = Vec::new();
    let mut lines = Vec::new();
    for outcome in outcomes {
        match outcome {
            SeedOutcome::Kept(seed) => {
                let what = sentences::seed_reading(data, &seed.reading);
                let label = format!("Dataset {} from Search: {what}", seed.n);
                let id = format!("seed-{}", seed.n);
                frames.push(seed_step(&id, StepStatus::Running, &label, None));
                frames.push(seed_step(&id, StepStatus::Complete, &label, None));
                let asked: Vec<&str> = seed.operations.iter().map(|o| o.phrase.as_str()).collect();
                lines.push(if asked.is_empty() {
                    format!("- dataset {}: {what}", seed.n)
                } else {
                    format!(
                        "- dataset {}: {what} (you asked: {})",
                        seed.n,
                        asked.join("; ")
                    )
                });
            }
            SeedOutcome::Failed(failed) => {
                let label = format!("Dataset {} from Search", failed.n);
                let id = format!("seed-{}", failed.n);
                frames.push(seed_step(&id, StepStatus::Running, &label, None));
                frames.push(seed_step(
                    &id,
                    StepStatus::Failed,
                    &label,
                    Some(failed.code),
                ));
                lines.push(format!(
                    "- dataset {} from Search was dropped: {}",
                    failed.n, failed.reason
                ));
            }
        }
    }
    let kept = node.kept().count();
    let label = format!("Kept {kept} of {} datasets from Search", outcomes.len());
    let failure = node
        .seeds_step_fails()
        .then_some(seeds::SERVICE_UNAVAILABLE);
    frames.push(seed_step("seeds", StepStatus::Running, &label, None));
    let status = if failure.is_some() {
        StepStatus::Failed
    } else {
        StepStatus::Complete
    };
    frames.push(seed_step("seeds", status, &label, failure));
    let lead = if kept == 0 {
        "No dataset from Search could be used, so I work from your question alone:"
    } else {
        "From Search:"
    };
    frames.push(delta(format!("{lead}\n{}\n\n", lines.join("\n"))));
    frames
}

/// The question as the kept seeds settle it: the first kept seed's
/// dataset (no search), its places when the question names none, and the
/// operation asked of it when the question names none.
pub(super) fn seeded(mut u: Understanding, node: Option<&SeedNode>) -> Understanding {
    let Some(seed) = node.and_then(|node| node.kept().next()) else {
        return u;
    };
    u.indicators = vec![understand::IndicatorMention {
        phrase: seed.reading.spec_id.clone(),
        indicators: vec![seed.reading.indicator],
    }];
    u.seed = Some(understand::SeedSource {
        spec_id: seed.reading.spec_id.clone(),
        seed: seed.n,
    });
    if u.places.is_empty() {
        u.places = seed
            .reading
            .places
            .iter()
            .map(|code| understand::PlaceMention {
                phrase: code.clone(),
                codes: vec![code.clone()],
            })
            .collect();
    }
    if u.operation.is_none()
        && let Some(operation) = seed.operations.first()
    {
        let phrase = understand(&operation.phrase);
        u.operation = match (operation.verb.as_str(), operation.target_year) {
            (seeds_verb, Some(year)) if seeds_verb == ledgerwire_wire::seed::FORECAST_VERB => {
                i32::try_from(year)
                    .ok()
                    .map(|target| understand::Operation::Forecast { target })
            }
            _ => phrase.operation,
        };
        if u.time == understand::Time::Unspecified {
            u.time = phrase.time;
        }
        u.level = u.level.or(phrase.level);
    }
    u
}
