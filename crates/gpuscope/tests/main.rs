//! The engine's integration tests, one module per capability, built as one test binary
//! (one link, one file on disk, rather than one of each per file).

mod common;

mod diagnosis;
mod gpu_run_verdicts;
mod leak_rule;
mod nsys_export;
mod nvidia_smi_files;
mod pickle_read;
mod run_sources;
mod runlog_writer;
mod snapshot_accumulating;
mod snapshot_reference;
mod snapshot_unknown_line;
mod tensor_profile_log;
mod tfevents_real_files;
mod tfevents_round_trip;
mod trace_annotations;
mod trace_classify;
mod trace_graphs;
mod trace_health;
mod trace_hta_parity;
mod trace_memory;
mod trace_operators;
mod trace_overlay;
mod trace_read;
mod trace_sequences;
mod trace_steps;
