// Package store defines what handoff needs from a database. The engine
// holds all the rules (revisions, ifRev, access); a Store only keeps rows
// and commits them atomically, so an embedded SQLite file and a shared
// PostgreSQL cluster can behave the same. Every Store must pass the
// conformance suite in store/storetest.
package store

import (
	"context"
	"errors"
	"time"
)

// ErrHeadMoved is returned by Commit when the document's head is no longer
// the one the write was built against. The engine reads the head again and
// retries; with ifRev set that retry reports a conflict. Never a blind
// overwrite.
var ErrHeadMoved = errors.New("store: document head moved")

// ErrNotFound is returned for a missing user or app.
var ErrNotFound = errors.New("store: not found")

// ErrExists is returned when creating a user or app that already exists.
var ErrExists = errors.New("store: already exists")

// ErrOwnsApps is returned when removing a user who still owns an app.
var ErrOwnsApps = errors.New("store: the user owns apps")

// Store is a database for handoff. Implementations must be safe for
// concurrent use.
type Store interface {
	Identity
	Visitors
	Documents
	Code
	Events
	Logs
	// Watch registers fn to hear of commits: after each durable commit it
	// is called with the app and its latest seq, in commit order. fn must
	// not block. Live feeds wake on it instead of polling.
	Watch(fn func(appID, seq int64))
	// Capabilities says what the store offers beyond this contract. A
	// wrapper that embeds a Store passes its inner store's on unchanged,
	// so nothing is lost through one, as a type assertion on the wrapper
	// would lose it.
	Capabilities() Capabilities
	Close() error
}

// Capabilities are a store's optional features; a nil field is one the
// store does not offer, and callers then do without it.
type Capabilities struct {
	Grants      GrantWatcher
	Apps        AppWatcher
	Nonces      NonceKeeper
	Heads       HeadHinter
	Revocations RevocationAnnouncer
	// CommitClaims: Commit honours EventSpec.ClaimUntil.
	CommitClaims bool
	// SharedTicks: other nodes take the store's ticks too, so a running
	// tick renews its hold (AcquireTick) lest the others wait out a
	// dead node's.
	SharedTicks bool
}

// Identity keeps users, their token hashes, apps and members.
type Identity interface {
	// CreateUser adds a user; ErrExists if the name is taken.
	CreateUser(ctx context.Context, u User) error
	User(ctx context.Context, name string) (*User, error)
	// AddToken stores the hash of a bearer token for a user. Tokens are
	// never stored in clear.
	AddToken(ctx context.Context, user string, hash []byte) error
	// ReplaceTokens makes hash the user's only token, in one step: every
	// other token of the user stops working. ErrNotFound if no such user.
	ReplaceTokens(ctx context.Context, user string, hash []byte) error
	// UserByToken finds the user owning a token hash; ErrNotFound if none.
	UserByToken(ctx context.Context, hash []byte) (*User, error)
	// Users lists every user by name.
	Users(ctx context.Context) ([]User, error)
	// RemoveUser deletes a user with their tokens, devices and app
	// memberships in one step, and returns the IDs of the apps they were
	// a member of. ErrNotFound if no such user; ErrOwnsApps, changing
	// nothing, while the user owns an app.
	RemoveUser(ctx context.Context, name string) (memberOf []int64, err error)

	// CreateApp adds an app and returns it with its ID; ErrExists if taken.
	CreateApp(ctx context.Context, a App) (*App, error)
	App(ctx context.Context, owner, name string) (*App, error)
	Apps(ctx context.Context) ([]App, error)
	// AddMember gives user the role in app; adding it twice is a no-op.
	AddMember(ctx context.Context, appID int64, user, role string) error
	// RemoveMember takes role from user ("" takes every role); ErrNotFound
	// when there was nothing to take.
	RemoveMember(ctx context.Context, appID int64, user, role string) error
	Members(ctx context.Context, appID int64) ([]Member, error)
	// SetPublic opens an app to anonymous readers (of public channels).
	SetPublic(ctx context.Context, appID int64, public bool) error
	// SetOrigins replaces the app's extra web origins (App.Origins).
	SetOrigins(ctx context.Context, appID int64, origins []string) error

	// AddDevice registers a device's public key; ErrExists if the user
	// already has a device of that name that is not revoked.
	AddDevice(ctx context.Context, d Device) error
	// Device returns a user's device by name, revoked ones included.
	Device(ctx context.Context, user, name string) (*Device, error)
	Devices(ctx context.Context, user string) ([]Device, error)
	// RevokeDevice marks a device revoked at at; ErrNotFound if none.
	RevokeDevice(ctx context.Context, user, name string, at time.Time) error

	// PutSecret stores an app secret, sealed (encrypted) by the engine.
	PutSecret(ctx context.Context, appID int64, name string, sealed []byte, at time.Time) error
	// DeleteSecret removes one; ErrNotFound if it does not exist.
	DeleteSecret(ctx context.Context, appID int64, name string) error
	Secrets(ctx context.Context, appID int64) ([]Secret, error)
}

// Device is a registered device credential: a public key only.
type Device struct {
	User      string
	Name      string
	PublicKey []byte
	App       string // "owner/name" when scoped to one app
	Created   time.Time
	Revoked   time.Time // zero while valid
}

// Secret is an app secret as stored: sealed, never in clear.
type Secret struct {
	Name    string
	Sealed  []byte
	Updated time.Time
}

// Documents keeps heads, the ledger of revisions and the per-app sequence.
type Documents interface {
	// Get returns the head of a document, a tombstone included, or nil
	// when the id was never written.
	Get(ctx context.Context, appID int64, db, id string) (*Doc, error)
	// Commit durably writes one revision: the ledger entry, the new head
	// and the next sequence number, atomically, only if the head's rev is
	// still w.BaseRev (else ErrHeadMoved). It returns once the write is
	// durable. Concurrent Commits may share one durable transaction.
	Commit(ctx context.Context, w *Write) (seq int64, err error)
	// History lists every revision of a document, oldest first.
	History(ctx context.Context, appID int64, db, id string) ([]Revision, error)
	// Query lists live documents whose Field equals Key, ordered by id,
	// starting after q.After; or, with q.Range, those whose Field holds a
	// number or string in the range, ordered by that value and then id,
	// starting after (q.AfterKey, q.After). Its cost must not grow with
	// the database.
	Query(ctx context.Context, q Query) ([]Doc, error)
	// Scan lists live documents of a database ordered by id, after after.
	Scan(ctx context.Context, appID int64, db, after string, limit int) ([]Doc, error)
	// Changes lists revisions with seq > since in sequence order; db ""
	// means every database of the app.
	Changes(ctx context.Context, appID int64, db string, since int64, limit int) ([]Revision, error)
	// LastSeq is the app's latest committed sequence number.
	LastSeq(ctx context.Context, appID int64) (int64, error)
	// Databases lists the app's databases, by name.
	Databases(ctx context.Context, appID int64) ([]string, error)
	// Transitions counts the moves of field between values across the
	// ledger of one database: from the value in the revision before (JSON
	// text, "" for a new document) to the value in each live revision.
	Transitions(ctx context.Context, appID int64, db, field string) ([]Transition, error)
	// GrantsFor lists the live grants that can concern user: every grant
	// of kind "role" and "public", and those of kind "user" and "member"
	// naming user.
	GrantsFor(ctx context.Context, appID int64, user string) ([]Grant, error)
}

// GrantWatcher is a Store that tells, before its Watch callbacks run,
// which commits changed an app's live grants, so cached permissions are
// dropped before any follower woken by the commit reads with them.
type GrantWatcher interface {
	WatchGrants(fn func(appID int64))
}

// AppWatcher is a Store shared by several nodes that tells each of them
// when an app's settings changed, whichever node changed them: its
// members, public flag, access timeout, secrets or active code. Callers
// drop what they cached of the app. fn is called soon after the change
// commits, also on the node that made it; it must not block. A store
// used by one process need not implement it: the engine drops its own
// caches when it changes an app.
type AppWatcher interface {
	WatchApps(fn func(appID int64))
}

// RevocationAnnouncer is a Store shared by several nodes that carries
// word of a revoked credential (a token signed out or replaced, a device
// revoked, a user removed) to every node, so each ends the live feeds
// the credential opened. fn hears of revocations made on any node, its
// own included, and with user "" when some word may have been lost (every
// feed should check); it must not block. A store used by one process need
// not implement it: the engine tells its own feeds.
type RevocationAnnouncer interface {
	AnnounceRevoked(ctx context.Context, user string) error
	WatchRevoked(fn func(user string))
}

// NonceKeeper is a Store shared by several nodes that remembers the
// tokens of signed requests across them, so a request signed once is
// accepted once by the whole cluster, not once per node.
type NonceKeeper interface {
	// UseNonce records key until expires and reports whether it was
	// unused (never seen, or seen with an expiry before now).
	UseNonce(ctx context.Context, key string, now, expires time.Time) (fresh bool, err error)
}

// HeadHinter is a Store whose Get costs a round trip, that can name
// without one the head a write will most likely find: one this process
// committed or read lately. A hint may be stale, since another node may
// have written since. Commit checks BaseRev against the real head, so a
// write decided on a stale hint gets ErrHeadMoved; callers must not take
// any other decision (a conflict, a refusal) from a hint alone. The Doc
// is shared: callers must not modify it.
type HeadHinter interface {
	HeadHint(appID int64, db, id string) *Doc
}

// Code keeps the numbered versions of each app's code. One version is
// active; deploying adds a version and activates it, a rollback activates
// an older one.
type Code interface {
	// SaveCode stores a new version, activates it and returns its number.
	SaveCode(ctx context.Context, appID int64, c CodeVersion) (int, error)
	// ActivateCode makes an existing version the active one.
	ActivateCode(ctx context.Context, appID int64, version int) error
	// ActiveCode returns the active version, or nil when none was deployed.
	ActiveCode(ctx context.Context, appID int64) (*CodeVersion, error)
	// CodeVersions lists every version, oldest first, without sources.
	CodeVersions(ctx context.Context, appID int64) ([]CodeVersion, error)
	// SetAccessTimeout sets the app's access-function deadline; 0 resets
	// it to the default.
	SetAccessTimeout(ctx context.Context, appID int64, d time.Duration) error
	// SetJSMemory sets how many MiB one call of the app's JavaScript may
	// grow the heap by; 0 resets it to the server's default.
	SetJSMemory(ctx context.Context, appID int64, mib int) error
}

// CodeVersion is one deployed version of an app's code.
type CodeVersion struct {
	Version int
	Access  string // access.js source, "" when absent
	Backend string // backend.js source, "" when absent
	// Files are the static files served at the root of the app's site, by
	// their slash-separated path inside the app folder's public/. Nil
	// when the version has none; CodeVersions leaves it nil.
	Files   map[string][]byte
	Author  string
	Created time.Time
	Active  bool
}

// User is a person or a service account. Name is the user's id.
type User struct {
	Name    string
	Admin   bool
	Created time.Time
	// App is "owner/name" for a visitor of that app, "" for a user of
	// the server.
	App string
	// PasswordHash is a visitor's password as an encoded argon2id hash;
	// the password itself is never stored.
	PasswordHash string
}

// App is owner/name with its numeric id.
type App struct {
	ID      int64
	Owner   string
	Name    string
	Public  bool
	Created time.Time
	// AccessTimeout is the app's access-function deadline; 0 = default.
	AccessTimeout time.Duration
	// JSMemory is the memory, in MiB, that one call of the app's
	// JavaScript may grow the heap by; 0 = the server's default.
	JSMemory int
	// Origins are the web origins besides the app's own site that may
	// call the API from a browser (a dev server, say).
	Origins []string
	// Signup is who may sign up as the app's visitor: "closed" (the
	// default), "invite" or "open".
	Signup string
}

// Member is one role of one user in an app.
type Member struct {
	User string
	Role string
}

// Doc is a document head (or a ledger entry's document). Body is the JSON
// object without the reserved _id, _rev and _deleted fields; nil for a
// tombstone.
type Doc struct {
	DB      string
	ID      string
	Rev     string
	Deleted bool
	Body    []byte
	Seq     int64
	Time    time.Time
	// Channels are the read channels the access function gave this
	// revision; nil when the database has no access function.
	Channels []string
	// HasGrants tells whether this head gives grants (Get only), so the
	// engine knows when a write changes who may read what.
	HasGrants bool
}

// Writer says who made a revision.
type Writer struct {
	User    string `json:"user,omitempty"`
	Device  string `json:"device,omitempty"`
	Handler string `json:"handler,omitempty"`
}

// Revision is one entry of the ledger.
type Revision struct {
	Doc
	Writer Writer
	// Path is how the write arrived: "http", "cli", "import", or a
	// backend handler's name.
	Path string
}

// Write is one revision to commit.
type Write struct {
	AppID   int64
	DB      string
	ID      string
	BaseRev string // the head's rev the write replaces; "" when none
	// PrevSeq is the seq of that head, 0 when none: the ledger links each
	// revision to the one before (oldDoc of events, transition counts).
	PrevSeq int64
	Rev     string
	Deleted bool
	Body    []byte
	Writer  Writer
	Path    string
	Time    time.Time
	// Channels and Grants come from the access function. The store keeps
	// the document's grants while it is live, so the grants in force are
	// always the union over live documents; a tombstone drops them.
	Channels []string
	Grants   []Grant
	// GrantsChanged is set by Commit: the write made a grant appear or
	// vanish, so cached answers to "who may read what" are stale.
	GrantsChanged bool
	// Event, when set, enqueues the write's onChange event in the same
	// transaction (the outbox): a committed write never loses its event.
	Event *EventSpec
}

// EventSpec describes the outbox event of a write.
type EventSpec struct {
	// Depth counts how many onChange writes led to this one (loop guard).
	Depth int
	// Origin is the seq of the write that started the chain of onChange
	// writes this one belongs to (the fan-out budget); 0 when the write
	// started a chain itself.
	Origin int64
	// NextAt is when the event may first be delivered.
	NextAt time.Time
	// ClaimUntil, when set on an event due at once, asks Commit to claim
	// it for the committer in the same transaction, leased until then and
	// its run marked begun, as a ClaimEvents with Start would: a committer
	// with a free slot then runs it at once, with no claim between the
	// commit and the handler. The store does so only when no earlier live
	// event of the document exists, and sets Claimed. A store may ignore
	// it (Claimed stays false).
	ClaimUntil time.Time
	// Claimed is set by Commit when it claimed the event (ClaimUntil).
	Claimed bool
}

// Transition is how often a field moved From one value To another.
type Transition struct {
	From, To string // JSON values; From is "" for documents created so
	Count    int64
}

// Grant is one read permission or role given by a live document.
type Grant struct {
	// Kind is "user" (Principal may read Channel), "role" (members with
	// role Principal may read Channel), "public" (everyone who may read
	// the app) or "member" (user Principal has role Channel).
	Kind      string
	Principal string
	Channel   string
}

// Query selects live documents by one field's value.
type Query struct {
	AppID int64
	DB    string
	// Field is a top-level name or a dotted path; callers validate it.
	Field string
	// Key is the JSON value the field must equal, unless Range is set.
	Key []byte
	// Range, when set, selects by a range of values instead of Key.
	Range *Range
	After string
	// AfterKey is the field's value (JSON) in document After, where a
	// range query's page resumes; nil starts at the range's beginning.
	AfterKey []byte
	Limit    int
}

// Range is an interval of field values for a Query. Only numbers and
// strings are in a range: numbers first, by value, then strings, by
// their UTF-8 bytes (code point order). From (inclusive) and To
// (exclusive) are JSON numbers or strings; nil leaves that end open.
type Range struct {
	From, To []byte
}

// Claim asks ClaimEvents for events of one app.
type Claim struct {
	AppID int64
	Now   time.Time
	Limit int
	// Lease is how long the claimed events are held.
	Lease time.Duration
	// Exclusive: the app's events go to one runner at a time.
	Exclusive bool
	// Start asks the claim to mark a run of each event it leases begun,
	// as StartEvent would, for a caller that starts every event it claims
	// at once or holds it for the next free slot: on a store across the
	// network that saves a round trip
	// between a commit and its handler. A store that does so sets
	// Event.Started on those events; the caller calls StartEvent for the
	// others. Ignored with Exclusive (those events run one after another).
	Start bool
}

// Events is the outbox: onChange events waiting for delivery. A claimed
// event is leased to the claimer until it is settled or the lease ends, so
// each delivery goes to one runner at a time.
type Events interface {
	// ClaimEvents leases up to c.Limit events of the app that are due
	// (NextAt <= c.Now), not dead and not leased, lowest seq first, each
	// the earliest live (not dead) event of its document: a document's
	// next event waits until the one before it is acked or dead, whoever
	// holds it, so the events of one document run one at a time in
	// commit order. Fewer than the limit means it leased every such event
	// (but those another node was claiming at that moment): callers need
	// not claim again until something changes.
	//
	// With c.Exclusive the app's events go to one runner at a time
	// (onChange concurrency 1, strict commit order): it leases nothing
	// while any live event of the app is leased and its lease has not
	// ended, whoever holds it. On a store shared by several nodes, the
	// check and the lease are one step. It may then lease several events
	// of one document, in seq order, for the caller runs them one after
	// another; it skips an event of a document with an earlier live event
	// that is not due yet (a retry backing off).
	ClaimEvents(ctx context.Context, c Claim) ([]Event, error)
	// RenewEvents moves the end of the caller's leases of the app's
	// events seqs to until, for the events it still holds: a claimer
	// renews the leases of the events it runs or is about to run, so a
	// lease can be short and a dead claimer's events come back soon.
	RenewEvents(ctx context.Context, appID int64, seqs []int64, until time.Time) error
	// NextEventDue reports the earliest NextAt of the app's events that
	// are neither dead nor leased; ok is false when there are none. A
	// store whose leases can outlive their holder (several nodes) may
	// also report the end of a lease, when that event falls due again
	// unless it is settled first.
	NextEventDue(ctx context.Context, appID int64) (at time.Time, ok bool, err error)
	// StartEvent records that a run of a leased event begins: it counts
	// the attempt and marks the event running, and returns once both
	// would survive a crash of this process (not necessarily one of the
	// machine). An event still marked running when a claim hands it out
	// again — its lease ended, or the store was reopened, without a
	// settlement — comes back Interrupted: whoever ran it died mid-run.
	// ErrNotFound when the caller no longer holds the event's lease.
	StartEvent(ctx context.Context, appID, seq int64) error
	// SettleEvent records the outcome of a delivery and ends its lease
	// and its run. It may become durable after it returns; until then the
	// event stays leased, so it is never handed out twice by mistake.
	// Losing it in a crash means one more delivery: at least once.
	SettleEvent(ctx context.Context, appID, seq int64, s Settlement) error
	// ListEvents lists the app's events, dead or waiting, by seq.
	ListEvents(ctx context.Context, appID int64, dead bool, afterSeq int64, limit int) ([]Event, error)
	// ReplayEvent makes a dead event deliverable again with fresh
	// attempts, as the start of a chain of its own (Origin 0);
	// ErrNotFound when no dead event has that seq.
	ReplayEvent(ctx context.Context, appID, seq int64, now time.Time) error
	// EventApps lists the apps that have events waiting.
	EventApps(ctx context.Context) ([]int64, error)
	// SaveTick records the latest run of the app's scheduled handler.
	SaveTick(ctx context.Context, appID int64, t Tick) error
	// LastTick returns the latest recorded tick, or nil.
	LastTick(ctx context.Context, appID int64) (*Tick, error)
	// AcquireTick gives the app's scheduled tick planned at planned to one
	// node: the first to ask gets true, every other node false. It is a
	// lease with fencing: planned only moves forward, so a node asking for
	// a tick older than the latest one given gets false; the node holding
	// a tick gets true again if it asks again. node names the asker (for
	// a PostgreSQL store, its Node()).
	//
	// A tick given holds the schedule until ReleaseTick, or until hold if
	// its node dies first: a later tick is refused while a tick planned
	// before it still holds at the later one's planned time, so ticks
	// never overlap, even when one runs longer than the interval.
	AcquireTick(ctx context.Context, appID int64, planned time.Time, node string, hold time.Time) (bool, error)
	// ReleaseTick ends the hold of the tick planned at planned, if node
	// still has it: the tick has ended.
	ReleaseTick(ctx context.Context, appID int64, planned time.Time, node string) error
}

// Event is one outbox entry with the revision it announces.
type Event struct {
	AppID     int64
	Seq       int64
	Depth     int
	Origin    int64 // as in EventSpec
	Attempts  int
	NextAt    time.Time
	LastError string
	Dead      bool
	// Interrupted is set by a claim when the event's last run started
	// (StartEvent) and never settled: its runner died mid-run. Attempts
	// counts that run.
	Interrupted bool
	// Running is set by ListEvents when a run of the event is in flight:
	// started (StartEvent) and not settled.
	Running bool
	// Started is set by a claim that also marked the event's run begun
	// (Claim.Start). Attempts and Interrupted still read as before that
	// mark, and an interrupted event is never marked.
	Started bool
	Rev     Revision
	// Old is the revision the write replaced; nil when the document was
	// absent or deleted before it.
	Old *Revision
}

// Settlement is the outcome of one delivery. A run given back without an
// outcome (the server stopping) settles with the attempts it found.
type Settlement struct {
	Ack       bool // handled: remove the event
	Dead      bool // out of attempts: park it
	Attempts  int
	NextAt    time.Time // when to try again (neither Ack nor Dead)
	LastError string
}

// Tick is one run of an app's scheduled handler.
type Tick struct {
	Planned  time.Time
	Started  time.Time
	Duration time.Duration
	Error    string // "" when it succeeded
}

// Logs keeps each app's handler log lines.
type Logs interface {
	// AppendLogs stores lines; it may return before they are durable.
	AppendLogs(ctx context.Context, lines []LogLine) error
	// Logs lists an app's lines with ID > after, oldest first.
	Logs(ctx context.Context, appID int64, after int64, limit int) ([]LogLine, error)
}

// LogLine is one line of an app's log.
type LogLine struct {
	ID      int64
	AppID   int64
	Time    time.Time
	Level   string
	Source  string // "onChange", "scheduled", "fetch", "access" or "server"
	Message string
	Fields  []byte // a JSON object, or nil
}
