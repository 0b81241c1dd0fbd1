// Package replay resumes an interrupted agent pipeline from its last verified
// boundary: it plans (which dispatches are done, which checkpoint to restore),
// verifies before trusting (commits for mutating roles, result files for
// output-producing ones), rebuilds the orchestrator's state as a synthetic
// Compression State Block, and re-dispatches.
//
// Decisions the design leaves open, and how this package takes them:
//
//   - A logical dispatch is an original manifest seq together with every later seq
//     that replays it (replay_of, followed transitively). It is done when its newest
//     attempt is completed or skipped, so a replayed run is not redone by the next
//     replay. Its time is the time of its newest attempt: work a replay redid after
//     a restore sits, in time, after that restore's checkpoint.
//   - The resume point is the newest boundary checkpoint taken at or before the
//     earliest dispatch that is not done or not verified. That one rule gives phase
//     boundaries and mid-phase (wave) resumes alike, and moving back past a failed
//     verification is the same rule applied to the failing dispatch.
//   - A dispatch's time is the **Timestamp:** of its dispatch file's audit header,
//     else the file's modification time. With neither (the file is lost), it takes
//     the time of the nearest earlier seq that has one, so ordering by time never
//     puts a dispatch before one it followed.
//   - The phase a checkpoint resumes is the phase of the first dispatch taken at or
//     after it; the "desired" checkpoint named in a fallback message comes from the
//     build pipeline's boundary table, keyed by the phase the problem lies in.
package replay
