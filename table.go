package handoff

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
)

// Table is the transition table of one database: it decides every write
// to the database before the write commits. It allows a write by
// returning who may read the new revision, and refuses it with [Forbid]
// (or a Require check of [Write]). Any other error, and a panic, refuse
// the write too, with code access_error, and go to the server's log: a
// table that fails must close its database, never open it.
//
// A table decides from the write alone; it is given no context and should
// read nothing else. That keeps it quick, since writes to a document wait
// for it, and repeatable: when another writer moves the head first, the
// engine calls it again against the new head.
type Table func(w *Write) (Decision, error)

// The names of the handlers, as [Write.Handler] holds them.
const (
	HandlerOnChange  = string(appcode.OnChange)
	HandlerScheduled = string(appcode.Scheduled)
)

// Write is one write as a table sees it.
type Write struct {
	DB string
	ID string
	// Doc is the incoming document with _id and without _rev; for a
	// delete, {"_id": ID, "_deleted": true}.
	Doc Doc
	// Old is the head the write replaces, with _id and _rev; nil when the
	// document is new or was deleted.
	Old     Doc
	Deleted bool
	// User is who writes; nil for an anonymous write.
	User *User
	// Handler is the app's handler making the write (HandlerOnChange,
	// HandlerScheduled), "" for everyone else. Only the engine sets it:
	// a user cannot pass for a handler.
	Handler string
	// Now is the clock's time when the write began. A table compares
	// leases and deadlines with it, so they follow the instance's clock.
	Now time.Time

	// readable are the channels the writer may read (RequireAccess).
	readable map[string]bool
}

// User is who makes a write.
type User struct {
	ID string
	// Roles are the user's roles in the app: given by its members and by
	// documents' Members.
	Roles   []string
	IsOwner bool   // the app's owner
	Device  string // the device the user signed with, if any
}

// Decision is what a table returns for a write it allows: where the new
// revision is and who may read it. The zero Decision allows the write in
// no channel, which only the owner and the handlers read.
type Decision struct {
	// Channels the revision is in; a reader sees it through a grant of
	// one of them.
	Channels []string
	// Grant gives readers channels, for as long as this revision is the
	// document's head.
	Grant Grant
	// Members gives users roles in the app: role → user ids.
	Members map[string][]string
}

// Grant says who may read which channels.
type Grant struct {
	Public []string            // channels everyone who may read the app reads
	Users  map[string][]string // user id → channels
	Roles  map[string][]string // role → channels
}

// Forbid refuses a write. reason goes to the writer as the error's
// Reason, so write it for them: what the write lacks.
func Forbid(reason string) error {
	return &errs.Error{Code: errs.Forbidden, Reason: reason, Message: "the transition table refused the write: " + reason}
}

// The checks below refuse with the reasons access.js's ctx gives, so an
// app reads the same whichever language its table is in.

// RequireBackend refuses the write unless one of the named handlers makes
// it. The steps a client must not take (claim a job, finish it) are kept
// for the handlers this way.
func (w *Write) RequireBackend(handlers ...string) error {
	if w.Handler == "" || !slices.Contains(handlers, w.Handler) {
		return Forbid("only the backend's " + strings.Join(handlers, " or ") + " handler may make this change")
	}
	return nil
}

// RequireUser refuses the write unless one of the named users makes it.
func (w *Write) RequireUser(ids ...string) error {
	if w.User == nil || !slices.Contains(ids, w.User.ID) {
		return Forbid("only user " + strings.Join(ids, " or ") + " may make this change")
	}
	return nil
}

// RequireRole refuses the write unless its user has one of the roles.
func (w *Write) RequireRole(roles ...string) error {
	if w.User == nil || !slices.ContainsFunc(roles, func(r string) bool { return slices.Contains(w.User.Roles, r) }) {
		return Forbid("this change needs the role " + strings.Join(roles, " or "))
	}
	return nil
}

// RequireAccess refuses the write unless its user may read one of the
// channels (the owner reads them all).
func (w *Write) RequireAccess(channels ...string) error {
	want := strings.Join(channels, " or ")
	if w.User == nil {
		return Forbid("this change needs access to channel " + want + "; sign in")
	}
	if w.User.IsOwner || slices.ContainsFunc(channels, func(c string) bool { return w.readable[c] }) {
		return nil
	}
	return Forbid("this change needs access to channel " + want)
}

// RequireOwner refuses the write unless the app's owner makes it.
func (w *Write) RequireOwner() error {
	if w.User == nil || !w.User.IsOwner {
		return Forbid("only the app's owner may make this change")
	}
	return nil
}

// Doc is a document as JSON: an object with _id, and _rev once committed.
type Doc []byte

// Decode unmarshals the document into v, a struct or a map. A struct
// field tagged `json:"_rev"` gets the revision, which a compare-and-set
// write passes back as PutOptions.IfRev.
func (d Doc) Decode(v any) error {
	if err := json.Unmarshal(d, v); err != nil {
		return errs.New(errs.Invalid, "the document does not decode into %T: %v; give the value fields of the document's types", v, err)
	}
	return nil
}

// MarshalJSON writes the document as it is, not as base64.
func (d Doc) MarshalJSON() ([]byte, error) {
	if d == nil {
		return []byte("null"), nil
	}
	return d, nil
}

// String returns the JSON text.
func (d Doc) String() string { return string(d) }
