package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// LogLine is one line of an app's handler log.
type LogLine struct {
	ID      int64           `json:"id"`
	Time    time.Time       `json:"time"`
	Level   string          `json:"level"`
	Source  string          `json:"source"`
	Message string          `json:"message"`
	Fields  json.RawMessage `json:"fields,omitempty"`
}

// Event is an onChange event waiting in the outbox, or parked as dead.
type Event struct {
	Seq       int64           `json:"seq"`
	DB        string          `json:"db"`
	DocID     string          `json:"docId"`
	Rev       string          `json:"rev"`
	Deleted   bool            `json:"deleted,omitempty"`
	Depth     int             `json:"depth"`
	Attempts  int             `json:"attempts"`
	NextAt    time.Time       `json:"nextAt"`
	Dead      bool            `json:"dead"`
	Running   bool            `json:"running"`
	LastError string          `json:"lastError,omitempty"`
	Doc       json.RawMessage `json:"doc"`
}

// Schedule is the state of an app's scheduled handler.
type Schedule struct {
	Interval    string     `json:"interval,omitempty"`
	Running     bool       `json:"running"`
	LastRun     *time.Time `json:"lastRun,omitempty"`
	Planned     *time.Time `json:"planned,omitempty"`
	Duration    string     `json:"duration,omitempty"`
	LastError   string     `json:"lastError,omitempty"`
	LoopStopped int64      `json:"loopStopped"`
	// FanOutStopped counts onChange writes refused by the fan-out budget.
	FanOutStopped int64 `json:"fanOutStopped"`
}

func afterQuery(after int64, limit int) url.Values {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return q
}

// Logs lists the app's log lines with an id above after.
func (c *Client) Logs(ctx context.Context, app string, after int64, limit int) ([]LogLine, error) {
	p, err := appPath(app)
	if err != nil {
		return nil, err
	}
	var out struct {
		Logs []LogLine `json:"logs"`
	}
	err = c.do(ctx, http.MethodGet, p+"/logs", afterQuery(after, limit), nil, &out)
	return nonNil(out.Logs), err
}

// Events lists the app's waiting events, or its dead ones.
func (c *Client) Events(ctx context.Context, app string, dead bool, after int64, limit int) ([]Event, error) {
	p, err := appPath(app)
	if err != nil {
		return nil, err
	}
	q := afterQuery(after, limit)
	if dead {
		q.Set("dead", "true")
	}
	var out struct {
		Events []Event `json:"events"`
	}
	err = c.do(ctx, http.MethodGet, p+"/events", q, nil, &out)
	return nonNil(out.Events), err
}

// Replay delivers a dead event again.
func (c *Client) Replay(ctx context.Context, app string, seq int64) error {
	p, err := appPath(app)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodPost, p+"/events/"+strconv.FormatInt(seq, 10)+"/replay", nil, nil, nil)
}

// Schedule reports the app's scheduled handler.
func (c *Client) Schedule(ctx context.Context, app string) (Schedule, error) {
	var out Schedule
	p, err := appPath(app)
	if err != nil {
		return out, err
	}
	err = c.do(ctx, http.MethodGet, p+"/schedule", nil, nil, &out)
	return out, err
}
