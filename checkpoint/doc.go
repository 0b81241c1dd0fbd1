// Package checkpoint keeps exact snapshots of a work tree in a shadow git
// repository (the store); the project's own .git is never touched.
//
// The store directory (mode 0700) is itself the git directory, as crucible's
// checkpoint procedure makes it (GIT_DIR=<store> git init), so that the
// procedure and rewind can share one store in either order. It holds git's
// own files, the procedure's, and rewind's, whose names all start with
// "rewind-" (a name neither git nor the procedure uses):
//
//	HEAD config objects/ refs/ ...  git's; one parentless commit and one ref
//	                        refs/rewind/checkpoints/<seq> per rewind checkpoint
//	info/exclude            the default excludes, for the procedure's git add -A
//	info/attributes         "* -text -filter ...": snapshots are byte-exact
//	index                   the procedure's index (git add -A); never rewind's
//	checkpoint-manifest.md  crucible's rows, shared with the procedure
//	rewind-index            rewind's persistent index: stat data kept between
//	                        checkpoints, so a checkpoint after a small change
//	                        costs one stat walk; a cache, rebuilt when damaged
//	                        (its shared part missing included); kept split
//	rewind-statcache        what the last capture saw of each file of the index
//	                        (stat data, nanosecond times), stamped with the
//	                        index's checksum: while it matches, a capture needs
//	                        neither ls-files nor diff-files (statcache.go)
//	rewind-commitcache      each checkpoint commit's tree and message by id,
//	                        so that the list needs no git (refcache.go)
//	rewind-bulkpacks        the packs a first checkpoint's bulk check-in
//	                        wrote, which the merge of small packs leaves
//	                        as they are (preimport.go)
//	sharedindex.<id>        git's: the shared part of the split rewind-index,
//	                        written anew when the index's own part passes an
//	                        eighth of it; the capture that leaves a part
//	                        deletes it (unless the procedure's index names
//	                        it), git deletes one left by a kill after a day,
//	                        and a prune keeps only the one the index names
//	rewind-home/            an empty directory used as git's HOME and hooks path
//	rewind-worktree         the absolute path of the one work tree the store serves
//	rewind-adopted-from     the work tree it served before `checkpoint adopt`
//	rewind-lock             flocked by every mutating operation; records the holder
//	rewind-restore-in-progress  present while a restore writes the work tree:
//	                        its target, safety checkpoint and --file paths
//	rewind-*                scratch indexes and pattern files of one command
//
// Two more kinds of ref keep objects: refs/rewind/pinned/<id> (a procedure
// checkpoint only a manifest row names) and refs/rewind/index-tree (the tree
// of rewind's index at the last prune, whose objects no checkpoint may hold).
//
// Portable runs (share.go): refs/rewind/runs/<session> holds a run's files as
// a chain of commits (export), refs/rewind/incoming/<pid>-<nonce>/ what a
// fetch brought until it is accepted; bundles and remotes carry them, remotes
// under refs/rewind/projects/<project id>/ (ProjectID).
//
// Sharing with the procedure. A repository without rewind-worktree was made by
// the procedure: it is adopted when its config's core.worktree (which the
// procedure's git init records) names the work tree, or, without one, when it
// is the work tree's default store; any other is refused as foreign. rewind
// lists the procedure's checkpoints (commits on the store's HEAD with messages
// "<reason> | <timestamp> | <source>", timestamps read as RFC 3339 or, like
// "2026-03-24 12:45:30", in local time), and rows of checkpoint-manifest.md
// the procedure wrote that no commit message gives (HEAD's commit recorded
// under a new reason, a commit on no branch). It restores them like its own,
// never evicts them, and its prune keeps them; rows naming rewind's own
// commits are only a cache of its refs. The procedure's health check, list,
// git checkout <hash> -- . restore and git gc --prune=now work on a rewind
// store: its gc keeps every ref, and a prune of rewind's drops the
// commit-graph the gc wrote. Objects only an index names: rewind's prune keeps
// the procedure's index's (repack and prune read it) and its own (through
// refs/rewind/index-tree); the procedure's gc keeps only its own index's, and
// a rewind index that lost objects so is rebuilt, with a warning.
//
// The earlier layout (the bare repository in <store>/git/, the index in
// <store>/index, the record in <store>/worktree, the lock in <store>/lock) is
// moved to this one by the first command that opens it, under both layouts'
// locks: rewind's files are renamed first, then git's entries move up, HEAD
// last, so an interrupted move is never taken for a finished one, and the next
// command completes it. The index and every checkpoint come along as they are.
//
// Health. Only proven corruption moves a repository aside (to
// <store>.corrupt-<time>/, never deleted): git ran, failed to open it, and its
// files show why (a HEAD that is neither a ref nor an id, which is repaired
// first; objects/ or refs/ missing; a config git cannot parse). Any other
// failure (git missing or killed, a transient error) is an error that leaves
// the store as it is. Every file rewind writes in the store is written whole or
// not at all (temporary file, every error checked, fsync, rename, fsync of the
// directory): on a full disk the old file stays.
//
// A checkpoint's commit message is "<reason> | <timestamp> | <source>" followed by
// trailers: Rewind-Branch and Rewind-Head (the project's then), Rewind-Skipped
// (what it left out, and why), and what a git tree cannot hold (meta.go):
// Rewind-Perms and Rewind-Perm (permission bits beyond the executable one),
// Rewind-Dir (directories holding no file of it) and Rewind-Repo (nested
// repositories). Its author and committer dates equal its timestamp, so a fixed
// --now gives reproducible ids. The <seq> in the ref name is a monotonic
// sequence that orders checkpoints taken within one second.
//
// What a checkpoint holds, and what a restore touches, is one rule, in rule.go:
//
//   - A checkpoint holds what the project holds, as the project's own git sees
//     it: every file its git tracks, whatever an ignore rule says, and every
//     untracked file its git does not ignore (every ignore source git reads:
//     .gitignore at every level, an enclosing repository's, .git/info/exclude,
//     core.excludesFile, ~/.config/git/ignore), minus the default excludes and
//     the work tree's .rewindignore (for untracked files, whatever a .gitignore
//     negation says), minus the store. Outside a git repository only the work
//     tree's .gitignore files count. A nested repository is held by the same
//     rule, with its own tracking and ignores, as plain files. The store's own
//     index is only a cache of stat data: a path's past in the store never
//     matters. What cannot be stored (over the size limit, unreadable, in a
//     directory that cannot be read, a name git never stores) is named.
//   - A restore writes and deletes only what the checkpoint holds, or would
//     have held had it existed: never a path ignored now, and never deletes one
//     the checkpoint's own rules (its .gitignore files and .rewindignore, its
//     nested repositories) ignore. A safety checkpoint comes first and undoes it
//     exactly. Content, type and permission bits come back, and directories the
//     checkpoint had without files; a directory holding anything the restore
//     does not remove is never removed, and an empty one the checkpoint did not
//     have goes (so the undo is exact). Whatever it leaves alone is named; what
//     it was asked to write and could not makes it incomplete (Restored.Failed).
//
// Crash safety: objects are written before the ref that names them, refs are
// created with an expected old value of zero, and a restore leaves a marker until
// it is done, so the next command can say how to finish or undo it.
package checkpoint
