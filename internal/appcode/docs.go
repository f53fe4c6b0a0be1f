package appcode

import "encoding/json"

// PutOptions are the conditions of a put.
type PutOptions struct {
	// IfRev commits only if the head is still this revision.
	IfRev string
	// IfAbsent creates the document only if no live one exists; otherwise
	// the put is a no-op that reports the existing rev.
	IfAbsent bool
}

// WriteResult reports a committed (or, with IfAbsent, existing) revision.
type WriteResult struct {
	ID       string `json:"id"`
	Rev      string `json:"rev"`
	Seq      int64  `json:"seq,omitempty"`
	Existing bool   `json:"existing,omitempty"`
}

// Page is one page of documents; Next is the cursor of the next page, ""
// on the last.
type Page struct {
	Docs []json.RawMessage `json:"docs"`
	Next string            `json:"next"`
}
