// Package report draws one pipeline run as a self-contained HTML page: a
// timeline with one lane per phase and one bar per dispatch, the crash point,
// the resume point, replayed dispatches linked to their originals, the A/B
// arms of a template experiment side by side with their spreads, and the diff
// tables. The page carries its CSS, script and SVG inline and loads nothing.
//
// Where the times come from. A manifest entry has no timestamp, so a bar is
// placed by what the run leaves on disk, and the page says which source each
// bar used:
//
//   - start: the **Timestamp:** of the dispatch file's audit header, else the
//     dispatch file's modification time (as replay reads them), else
//     "inferred": the start of the nearest earlier seq that has one;
//   - end: start + duration_s of the authoritative entry, else the
//     modification time of its result file "<seq>-<template>-result.md", else
//     (a dispatch still in flight) the end of the run, drawn open, else
//     "inferred": the start of the next dispatch in its lane, or its own start;
//   - when no dispatch of the run has a time at all (the dispatch files are
//     gone), the bars are laid out one slot per dispatch in seq order and the
//     page says in a banner that the axis is not time.
//
// The receipt ledger carries no times; its verdicts are shown beside the
// dispatches they name. Every string read from the run is escaped by
// html/template, so a hostile summary or role cannot add markup or script.
package report
