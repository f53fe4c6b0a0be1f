package postgres

import (
	"sync"
	"time"
)

// dueMemo is what a claim found in events_due: the deliverer asks
// NextEventDue right after a claim that found nothing, and claims again
// at the next commit's wake-up; a read that recent is as good as a new
// one. This node forgets it when it changes the app's events in a way that
// can bring one due sooner (a commit of an event its committer did not
// claim, a settlement, a replay), and when it hears of another node's
// commit; another node's settlement is seen as late as if the read had
// been made dueMemoLife earlier.
type dueMemo struct {
	at   int64
	ok   bool
	read time.Time
}

const dueMemoLife = 5 * time.Millisecond

// dueMemos holds each app's memo. A look at events_due can be under way
// while the memo is dropped, and would then store what it read before
// the change: drops are counted, and a look stores its memo only if none
// came since it began.
type dueMemos struct {
	mu    sync.Mutex
	memos map[int64]dueMemo
	count map[int64]uint64 // drops so far
}

// drops is what a look passes to set once it has read.
func (d *dueMemos) drops(app int64) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.count[app]
}

// set stores m unless the memo was dropped since drops was read.
func (d *dueMemos) set(app int64, drops uint64, m dueMemo) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.count[app] != drops {
		return
	}
	if d.memos == nil {
		d.memos = map[int64]dueMemo{}
	}
	d.memos[app] = m
}

func (d *dueMemos) get(app int64) (dueMemo, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m, ok := d.memos[app]
	return m, ok
}

// drop forgets app's memo, and the looks under way.
func (d *dueMemos) drop(app int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.memos, app)
	if d.count == nil {
		d.count = map[int64]uint64{}
	}
	d.count[app]++
}

// leased takes in events leased until end: the memo's next due time is
// no later than that.
func (d *dueMemos) leased(app int64, end int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if m, ok := d.memos[app]; ok && (!m.ok || m.at > end) {
		d.memos[app] = dueMemo{at: end, ok: true, read: m.read}
	}
}

// dueMemo is the app's memo, and whether it is recent enough to use.
func (s *Store) dueMemo(appID int64) (dueMemo, bool) {
	m, found := s.dues.get(appID)
	if !found {
		return dueMemo{}, false
	}
	life := s.dueLife
	if life == 0 {
		life = dueMemoLife
	}
	return m, time.Since(m.read) < life
}

// committedEvents keeps the app's memo through a batch of this node whose
// events were all claimed by their committers, as they went in: they run
// here, and fall due only when their leases end, which the memo takes in.
// Any other event may be due now, and the memo goes.
func (s *Store) committedEvents(app int64, batch []*commitReq, results []commitRes) {
	leaseEnd := int64(0)
	for i, r := range results {
		ev := batch[i].w.Event
		if r.err != nil || r.seq == 0 || ev == nil {
			continue
		}
		if !ev.Claimed || ev.ClaimUntil.IsZero() {
			s.dues.drop(app)
			return
		}
		if end := ev.ClaimUntil.UnixNano(); leaseEnd == 0 || end < leaseEnd {
			leaseEnd = end
		}
	}
	if leaseEnd != 0 {
		s.dues.leased(app, leaseEnd)
	}
}
