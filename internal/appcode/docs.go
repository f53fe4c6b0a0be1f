package appcode

import (
	"bytes"
	"encoding/json"
)

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

// DocJSON renders a document with its _id and _rev (none when rev is "",
// and _deleted for a tombstone) in front of the body's fields.
func DocJSON(id, rev string, deleted bool, body []byte) json.RawMessage {
	var b bytes.Buffer
	b.Grow(len(body) + len(id) + len(rev) + 32)
	b.WriteString(`{"_id":`)
	writeJSONString(&b, id)
	if rev != "" {
		b.WriteString(`,"_rev":`)
		writeJSONString(&b, rev)
	}
	if deleted {
		b.WriteString(`,"_deleted":true`)
	}
	if len(body) > 2 {
		b.WriteByte(',')
		b.Write(body[1:])
	} else {
		b.WriteByte('}')
	}
	return b.Bytes()
}

func writeJSONString(b *bytes.Buffer, s string) {
	// Ids and revs are plain ASCII almost always: quote them directly.
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			b.Write(q)
			return
		}
	}
	b.WriteByte('"')
	b.WriteString(s)
	b.WriteByte('"')
}
