// Package checkpoint keeps exact snapshots of a work tree in a shadow git
// repository (the store); the project's own .git is never touched.
//
// The store, <store>/ (mode 0700), holds:
//
//	git/                   the bare shadow repository; one parentless commit and one
//	                       ref refs/rewind/checkpoints/<seq> per checkpoint
//	index                  the persistent index: stat data kept between checkpoints,
//	                       so a checkpoint after a small change costs one stat walk
//	home/                  an empty directory used as git's HOME and hooks path
//	worktree               the absolute path of the one work tree the store serves
//	lock                   flocked by every mutating operation; records the holder
//	checkpoint-manifest.md crucible's rows, a cache rebuilt from the refs
//	restore-in-progress    present while a restore writes the work tree
//
// A checkpoint's commit message is "<reason> | <timestamp> | <source>" followed by
// trailers (Rewind-Branch, Rewind-Head, Rewind-Skipped); its author and committer
// dates equal its timestamp, so a fixed --now gives reproducible ids. The <seq> in
// the ref name is a monotonic sequence that orders checkpoints taken within one
// second.
//
// What a checkpoint holds: every file git would list as tracked or untracked and
// not ignored (the project's .gitignore files, the default excludes and
// .rewindignore, written to git/info/exclude), plus every file the project's own
// git tracks even when a default exclude matches it. Nested repositories are
// listed through their own work trees and their files added one by one, so they
// are stored as plain files, never gitlinks, and nothing on disk is renamed;
// .git directories are never captured. Files over the size limit and unreadable
// files are skipped and named.
//
// Restore is exact: a safety checkpoint records the current state first, and the
// difference between the two trees is applied: files the checkpoint lacks are
// removed, the others written. Files neither holds (ignored, excluded, oversize)
// are never touched.
//
// Crash safety: objects are written before the ref that names them, refs are
// created with an expected old value of zero, and a restore leaves a marker until
// it is done, so the next command can say how to finish or undo it.
package checkpoint
