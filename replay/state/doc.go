// Package state reads, judges and rewrites the state files of two pipeline
// styles that keep their progress in files of their own rather than in a
// dispatch manifest, so that rewind gives them the same safety as manifest
// pipelines: validate before resuming, decide deterministically, write
// atomically.
//
//   - The recovery playbook (style 1): specs/<NNN>-<feature>/.pipeline-state.md,
//     a Markdown file with a header of `key: value` lines and the sections
//     Completed Stages, Human Checkpoints and Notes. DecidePlaybook applies the
//     playbook's validations and decision tree; Resume writes the decision back.
//   - Phase and execution state (style 2): memory/state/phase.json and
//     memory/state/execution.json. DecidePhase validates them and applies the
//     per-phase resume logic; Recover repairs the two crash scenarios; Archive
//     moves the state aside keeping the newest five archives; WriteDocument and
//     Set are the validated, atomic writes skills use for their own updates.
//
// Decisions the sources leave open, and how this package takes them, are in the
// comments of the functions that take them and in the README's "state" section.
//
// Every file is written whole or not at all: a temporary file in the same
// directory, fsync, rename, fsync of the directory. A style-2 update clears
// interruption_safe in phase.json first and sets it again with the last write,
// so an update interrupted between its files is visible to the next check.
package state
