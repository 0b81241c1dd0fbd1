package checkpoint

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrUnknownRef means REF names no checkpoint; ErrAmbiguousRef means it names
// several. Both come as *RefError with the candidates.
var (
	ErrUnknownRef   = errors.New("no such checkpoint")
	ErrAmbiguousRef = errors.New("ambiguous checkpoint")
	ErrNoCheckpoint = errors.New("the store has no checkpoints")
)

// RefError is a REF that does not name exactly one checkpoint.
type RefError struct {
	Ref        string
	Err        error         // ErrUnknownRef, ErrAmbiguousRef or ErrNoCheckpoint
	Candidates []*Checkpoint // the matches, or the newest checkpoints
}

func (e *RefError) Error() string {
	return fmt.Sprintf("checkpoint %q: %v", e.Ref, e.Err)
}

func (e *RefError) Unwrap() error { return e.Err }

// Resolve finds the checkpoint REF names, among cps (oldest first): a full or
// unique (4+ characters) commit id prefix, which wins over a reason; a reason,
// the newest checkpoint whose reason equals it or extends it at a word boundary
// ("pre-wave" matches "pre-wave-3"; "pre-wave-1" does not match "pre-wave-12");
// "latest"; or "latest~N".
func Resolve(cps []*Checkpoint, ref string) (*Checkpoint, error) {
	if len(cps) == 0 {
		return nil, &RefError{Ref: ref, Err: ErrNoCheckpoint}
	}
	if ref == "latest" || strings.HasPrefix(ref, "latest~") {
		n := 0
		if ref != "latest" {
			v, err := strconv.Atoi(strings.TrimPrefix(ref, "latest~"))
			if err != nil || v < 0 {
				return nil, &RefError{Ref: ref, Err: ErrUnknownRef, Candidates: newest(cps, 5)}
			}
			n = v
		}
		if n >= len(cps) {
			return nil, &RefError{Ref: ref, Err: fmt.Errorf("%w: only %d checkpoints", ErrUnknownRef, len(cps)), Candidates: newest(cps, 5)}
		}
		return cps[len(cps)-1-n], nil
	}
	if len(ref) >= 4 && isHex(ref) {
		var ids []*Checkpoint
		for _, c := range cps {
			if strings.HasPrefix(c.ID, strings.ToLower(ref)) {
				ids = append(ids, c)
			}
		}
		// Two refs can name one commit (same tree, reason and second): the
		// newest stands for both.
		distinct := map[string]bool{}
		for _, c := range ids {
			distinct[c.ID] = true
		}
		switch {
		case len(distinct) == 1:
			return ids[len(ids)-1], nil
		case len(distinct) > 1:
			return nil, &RefError{Ref: ref, Err: ErrAmbiguousRef, Candidates: ids}
		}
	}
	for i := len(cps) - 1; i >= 0; i-- {
		if ReasonMatches(cps[i].Reason, ref) {
			return cps[i], nil
		}
	}
	return nil, &RefError{Ref: ref, Err: ErrUnknownRef, Candidates: newest(cps, 5)}
}

// ReasonMatches reports whether reason equals prefix or extends it at a word
// boundary.
func ReasonMatches(reason, prefix string) bool {
	if !strings.HasPrefix(reason, prefix) || prefix == "" {
		return false
	}
	return len(reason) == len(prefix) || strings.ContainsRune("-_ .:", rune(reason[len(prefix)]))
}

func newest(cps []*Checkpoint, n int) []*Checkpoint {
	var out []*Checkpoint
	for i := len(cps) - 1; i >= 0 && len(out) < n; i-- {
		out = append(out, cps[i])
	}
	return out
}

func isHex(s string) bool {
	for _, r := range strings.ToLower(s) {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}
