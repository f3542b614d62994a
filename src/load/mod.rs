//! The plan: what each step sends and when. Templates, the weighted mix, load levels,
//! open-loop arrival schedules; pacing is kept apart from execution (the engine).

pub mod flow;
pub mod mix;
pub mod scenario;
pub mod schedule;
pub mod schema_args;
pub mod template;
