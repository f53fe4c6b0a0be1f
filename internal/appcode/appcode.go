// Package appcode holds the contracts between the engine and an app's
// code: what access.js is asked and answers (access.go), what backend.js's
// handlers receive and may do (backend.go, fetch.go, docs.go), and the
// names of an app's files (files.go) and handlers. It is a leaf: the
// engine, the JavaScript side (access, backend) and Go handlers all
// import it, and it imports none of them, so no package needs the engine
// only for its types.
package appcode

import "encoding/json"

// Handler names a backend.js handler: the actor of the writes it makes,
// which ctx.requireBackend checks in access.js.
type Handler string

// The handlers of backend.js.
const (
	OnChange  Handler = "onChange"
	Scheduled Handler = "scheduled"
	Fetch     Handler = "fetch"
)

// LogFields builds the fields of an app's log line from key, value
// pairs; a pair whose key is not a string is left out.
func LogFields(kv ...any) json.RawMessage {
	m := make(map[string]any, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		if k, ok := kv[i].(string); ok {
			m[k] = kv[i+1]
		}
	}
	b, _ := json.Marshal(m)
	return b
}
