//! Switches of a plan's choices (deltas 22 and 23): a plan card's chart
//! or level switched to another option, or why it cannot be.
//!
//! Owns: which switches a query can take and the refusal of the others
//! (`option_unservable`). Pure. Must never: build frames (the agent
//! re-plans with [`super::planner::plan_frame`]) or keep the switched
//! plan anywhere but the query it returns.

use super::assumptions::Assumption;
use super::data::{Dataset, Level};
use super::planner::{CHART_CHOICE, LEVEL_CHOICE, Query};
use super::understand::{ChartKind, Operation};

/// Why a switch cannot apply; the plan is re-offered with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchRefusal {
    pub code: &'static str,
    pub reason: String,
}

/// `switch_failed.code` of an option the data or the card cannot serve;
/// asking again fails the same way.
pub const OPTION_UNSERVABLE: &str = "option_unservable";

fn unservable(reason: String) -> SwitchRefusal {
    SwitchRefusal {
        code: OPTION_UNSERVABLE,
        reason,
    }
}

/// `base` with one choice switched to `option_id`, or why it cannot be.
pub fn switched(
    data: &Dataset,
    base: &Query,
    choice_id: &str,
    option_id: &str,
) -> Result<Query, SwitchRefusal> {
    let mut query = base.clone();
    match choice_id {
        CHART_CHOICE => {
            let chart = ChartKind::from_component_type(option_id)
                .ok_or_else(|| unservable(format!("There is no chart called {option_id}.")))?;
            chart_fits(&query, chart)?;
            query.chart = chart;
        }
        LEVEL_CHOICE if query.level.is_some() => {
            let level = Level::from_key(option_id)
                .ok_or_else(|| unservable(format!("There is no level called {option_id}.")))?;
            if data.places_at(query.indicator, level).is_empty() {
                return Err(unservable(format!(
                    "The bundled data has no {} for {}.",
                    query.indicator.name(),
                    level.plural()
                )));
            }
            query.level = Some(level);
            // The user has picked the level now: no longer an assumption.
            query.assumed.retain(|a| *a != Assumption::Level);
        }
        _ => {
            return Err(unservable(
                "This plan has no such choice to switch.".to_owned(),
            ));
        }
    }
    Ok(query)
}

/// Whether `chart` can show what `query` computes.
fn chart_fits(query: &Query, chart: ChartKind) -> Result<(), SwitchRefusal> {
    let over_time = query.from != query.to || matches!(query.operation, Operation::Forecast { .. });
    let one_number = matches!(
        query.operation,
        Operation::Value | Operation::Total | Operation::Average | Operation::Share
    ) && query.places.len() <= 1;
    match chart {
        ChartKind::Line if !over_time => Err(unservable(format!(
            "A line chart needs more than one year, and this plan computes {} alone.",
            query.to
        ))),
        ChartKind::SingleValue if !one_number => Err(unservable(
            "A single value shows one number, and this plan gives several figures.".to_owned(),
        )),
        _ => Ok(()),
    }
}
