// Package manifest reads and writes the dispatch manifest of an agent pipeline
// (manifest.jsonl: one compact JSON object per line, append-only, the last entry
// for a seq authoritative) and the pipeline's marker files.
//
// The writer is byte-compatible with crucible's scripts/dispatch.py: the same key
// order, Python's json.dumps(ensure_ascii=False, separators=(",", ":")) escaping
// and number formatting, lines of at most 4096 bytes including the newline, and
// the same summary truncation. Beyond dispatch.py, every append holds an flock on
// manifest.jsonl and fsyncs, so parallel writers never interleave or lose a line.
//
// The reader streams line by line (never gjson.ForEachLine, which runs a torn
// line into the next one), validates each line, reports a bad one with its line
// number and skips it, and tolerates a torn last line. Memory grows with the
// number of distinct seqs, not with the size of the file: the first pass
// (validation spread over the CPUs, records merged in file order) keeps only
// where each seq's authoritative line lies, the second reads those lines back.
//
// The package prints nothing: warnings go to an io.Writer or come back as
// values, and errors are returned.
package manifest
