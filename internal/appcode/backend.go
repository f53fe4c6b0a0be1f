package appcode

import (
	"context"
	"encoding/json"
	"time"
)

// Backend is one compiled backend.js.
type Backend interface {
	// Config is the checked `config` export, defaults filled in.
	Config() BackendConfig
	// Has reports whether the module exports the handler ("onChange",
	// "scheduled", "fetch").
	Has(handler Handler) bool
	// OnChange runs onChange for one event. It returns when the handler's
	// promise settles: nil acks the event; an error redelivers it. The
	// run is stopped at Config().OnChange.Timeout.
	OnChange(ctx context.Context, ev ChangeEvent, hc HandlerContext) error
	// Scheduled runs one tick of the scheduled handler.
	Scheduled(ctx context.Context, ev TickEvent, hc HandlerContext) error
	// Fetch runs the fetch handler for one request of the app's HTTP lane
	// and returns its response. An error means the handler threw, broke
	// a limit or returned something that is no response; the caller
	// answers with a server error and logs it for the app.
	Fetch(ctx context.Context, req FetchRequest, hc HandlerContext) (FetchResponse, error)
	// Close releases the runtimes.
	Close()
}

// BackendConfig is backend.js's `config` export.
type BackendConfig struct {
	Scheduled struct {
		// Interval between ticks; 0 when the app has no scheduled config.
		Interval time.Duration
		// Timeout is the run limit of one tick; default 15 min. A tick
		// may run past its interval (the ticks it overlaps are skipped).
		Timeout time.Duration
	}
	OnChange struct {
		Concurrency int           // runs at once per app on each node; default 16
		Timeout     time.Duration // run limit of one event; default 15 min
		MaxAttempts int           // deliveries before an event is dead; default 10
		// FanOut bounds the writes that onChange runs make, in all, for
		// one originating write; default DefaultFanOut.
		FanOut int
		// DBs and When filter the commits that get an event (filter.go):
		// only commits to one of DBs, and only those whose document has,
		// for each entry of When, one of its values. Empty: every commit.
		DBs  []string
		When []FieldMatch
	}
	// Fetch limits the handlers' outbound HTTP (the global fetch).
	Fetch struct {
		// Allow lists the hosts handlers may call, as "host" (any port)
		// or "host:port", lowercase; empty allows none.
		Allow   []string
		Timeout time.Duration // of one call, headers and body; default 10 s
		// MaxBytes bounds one response body; default 1 MiB.
		MaxBytes int64
	}
}

// Defaults of BackendConfig.
const (
	DefaultConcurrency   = 16
	DefaultRunTimeout    = 15 * time.Minute
	DefaultMaxAttempts   = 10
	MinScheduledInterval = time.Second
	MaxScheduledInterval = 24 * time.Hour

	DefaultFetchTimeout  = 10 * time.Second
	DefaultFetchMaxBytes = 1 << 20
)

// ChangeEvent is onChange's event (docs/architecture.md, "backend.js and delivery"). Doc and OldDoc are JSON
// with _id and _rev as committed; OldDoc is nil when the document was
// absent or deleted; for a delete Doc is the tombstone (_deleted: true).
type ChangeEvent struct {
	DB      string          `json:"dbName"`
	DocID   string          `json:"docId"`
	Doc     json.RawMessage `json:"doc"`
	OldDoc  json.RawMessage `json:"oldDoc"`
	Seq     int64           `json:"seq"`
	Deleted bool            `json:"deleted"`
	Attempt int             `json:"attempt"`
}

// TickEvent is scheduled's event: the planned time of the tick.
type TickEvent struct {
	ScheduledTime int64 `json:"scheduledTime"` // epoch milliseconds
}

// HeapLimiter is a HandlerContext whose app has a memory limit of its
// own for one handler run, in bytes (0: the server's default).
type HeapLimiter interface {
	HeapLimit() int64
}

// HandlerContext is what a running handler may do: ctx.db, ctx.log and
// ctx.app. Its writes pass through access.js as the handler they come
// from; its reads see every document of the app.
type HandlerContext interface {
	App() (owner, name string)
	Put(ctx context.Context, db, id string, doc json.RawMessage, o PutOptions) (WriteResult, error)
	// Get returns nil (no error) when the document is absent or deleted.
	Get(ctx context.Context, db, id string) (json.RawMessage, error)
	Delete(ctx context.Context, db, id, ifRev string) (WriteResult, error)
	Query(ctx context.Context, db, field string, key json.RawMessage, limit int, after string) (Page, error)
	// Log stores a line in the app's log. Fields is a JSON object or nil.
	Log(level, message string, fields json.RawMessage)
	// Secret returns a secret of the app, "" and false when unset.
	Secret(name string) (string, bool)
}

// FieldMatch is one entry of config.onChange.when: a top-level field of
// the committed document and the values it may have.
type FieldMatch struct {
	Field string
	// Values are JSON scalars as encoding/json decodes them: string,
	// float64, bool or nil (null). The field matches any of them.
	Values []any
}

// DefaultFanOut is the default of config.onChange.fanOut: the writes that
// onChange runs may make, in all, for one originating write.
const DefaultFanOut = 100
