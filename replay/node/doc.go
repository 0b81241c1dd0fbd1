// Package node snapshots, diffs, replays and verifies single nodes of an agent
// run, as cool-workflow's `cw node snapshot|diff|replay|verify` does, and fails
// closed when the source moved since a snapshot was taken.
//
// Two kinds of run are read:
//
//   - a cool-workflow run directory (.cw/runs/<id>/state.json), whose nodes are
//     the StateNodes of state.json. Every output is byte-identical to
//     cool-workflow's own (v0.2.6): the 13-field projection, the normalizer, the
//     fingerprints, the ids, the JSON.stringify(v, null, 2) layout. That needs
//     JavaScript's view of JSON, so this package has its own JSON reader and
//     writer (jsvalue.go): numbers are float64 written as JavaScript writes
//     them, keys sort in UTF-16 order, lone surrogates survive, invalid UTF-8 is
//     replaced as Node's decoder replaces it.
//   - a crucible dispatch directory (manifest.jsonl), whose nodes are the seqs:
//     a node's body is its normalized authoritative entry, its dispatch file
//     (hash and header fields), its output artifacts (paths and hashes), its
//     receipt-ledger rows and its replay links; its fingerprint covers the raw
//     manifest lines of the seq, the dispatch file's bytes, the artifacts' and
//     ledger rows' hashes, so any change to any of them is drift.
//
// Where cool-workflow is silently wrong, strict mode (the default for crucible
// runs, opt-in for cool-workflow runs so their outputs stay byte-compatible)
// closes the gaps: kind, loopStage and contractId become diff sections, and the
// source fingerprint also covers a hash of the node's whole content, so an edit
// that did not bump updatedAt is drift. Strict snapshots and replays say so
// ("strict": true), and their freshness is always checked the same way.
//
// Snapshots and replays are written under <run>/nodes/snapshots/<node>/, whole
// or not at all. Nothing here reads the clock: times come from the caller, and
// default to the epoch, as cool-workflow's do.
package node
