package handoff

import (
	"context"
	"time"
)

// App is one app: its name, its transition tables and its handlers. The
// instance makes this code the app's live code at open.
type App struct {
	// Name is "owner/name". The owner is created as a user if missing;
	// the owner and the admin read everything in the app.
	Name string
	// Public opens the app's reads to the anonymous, who see what the
	// tables put in Grant.Public channels, and to users the tables have
	// granted nothing yet, who get an empty answer rather than a refusal.
	// Writes reach the tables either way, and they decide.
	Public bool
	// Tables holds the transition table of each database that has one.
	// Writes to a database without one follow the server's default rule:
	// the owner and the app's editors write.
	Tables map[string]Table
	// OnChange runs after commits; zero means none.
	OnChange OnChange
	// Scheduled runs once per interval; zero means none.
	Scheduled Scheduled
}

// OnChange is an app's handler of commits. It runs at least once for
// each commit that passes DBs and When: an error, a panic or a crash
// before it returns delivers the commit again later, so it must do its
// work so that twice does no harm (a compare-and-set write, a key per
// run). Each document's commits run one at a time, in commit order.
type OnChange struct {
	// Handle runs for one commit. db writes as the handler: through the
	// tables, with Write.Handler set to HandlerOnChange.
	Handle func(ctx context.Context, c Change, db *Docs) error
	// DBs, when set, limits the handler to commits to these databases.
	DBs []string
	// When, when set, limits it to commits whose document has, in each
	// top-level field named, one of the values listed (strings, numbers,
	// booleans or nil). The commits left out cost no run at all, which is
	// why a job pattern delivers only pending jobs: its own claims and
	// finishes are most commits.
	When map[string][]any
	// Concurrency is how many runs go at once on each node; default 16.
	Concurrency int
	// MaxAttempts is how many times a commit is delivered before it is
	// given up as dead; default 10.
	MaxAttempts int
	// Timeout stops a run (its ctx ends) and counts a failed attempt;
	// default 15 minutes.
	Timeout time.Duration
	// FanOut bounds the writes that runs make, in all, for one write
	// from outside (a loop of handlers writing runs out); default 100.
	FanOut int
}

// Change is the commit an OnChange run is for.
type Change struct {
	DB string
	ID string
	// Doc is the committed document, with _id and _rev; for a delete,
	// the tombstone.
	Doc Doc
	// Old is the head the commit replaced; nil when there was none.
	Old     Doc
	Deleted bool
	Seq     int64 // the commit's place in the app's ledger
	Attempt int   // 1 on the first delivery
}

// Scheduled is an app's handler of time: a sweep for what no commit will
// wake, such as a lease whose worker went away.
type Scheduled struct {
	// Handle runs one tick. db writes as the handler: through the tables,
	// with Write.Handler set to HandlerScheduled.
	Handle func(ctx context.Context, t Tick, db *Docs) error
	// Interval between ticks, from one second to a day. Ticks fall on
	// multiples of it, and one that overruns skips those it missed. On
	// several nodes each tick runs on one of them.
	Interval time.Duration
	// Timeout stops a tick; default 15 minutes.
	Timeout time.Duration
}

// Tick is one tick of a Scheduled handler.
type Tick struct {
	Planned time.Time // when the tick was due
}
