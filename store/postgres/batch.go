package postgres

import (
	"bytes"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/handoff-run/handoff/store"
)

// queueLedger adds the ledger rows of the accepted writes, in one
// statement; the j-th accepted write takes the batch's j-th seq.
func queueLedger(b *pgx.Batch, app, n int64, batch []*commitReq, accepted []int) {
	m := len(accepted)
	var (
		dbs, ids, revs, users, devices, handlers, paths = make([]string, m), make([]string, m), make([]string, m),
			make([]string, m), make([]string, m), make([]string, m), make([]string, m)
		deleted        = make([]bool, m)
		bodies, chans  = make([]*string, m), make([]*string, m)
		times, prevSeq = make([]int64, m), make([]int64, m)
		places         = make([]int64, m)
	)
	for j, i := range accepted {
		w := batch[i].w
		dbs[j], ids[j], revs[j], deleted[j] = w.DB, w.ID, w.Rev, w.Deleted
		if !w.Deleted {
			t := string(w.Body)
			bodies[j] = &t
		}
		times[j] = w.Time.UnixNano()
		users[j], devices[j], handlers[j], paths[j] = w.Writer.User, w.Writer.Device, w.Writer.Handler, w.Path
		chans[j], prevSeq[j], places[j] = channelsJSON(w.Channels), w.PrevSeq, int64(j)+1
	}
	b.Queue(sqlLedger, app, n, dbs, ids, revs, deleted, bodies, times, users, devices, handlers, paths, chans, prevSeq, places)
}

// queueHeads moves each document written to its last accepted write:
// an update of the heads that exist, an insert of the others.
func queueHeads(b *pgx.Batch, app, n int64, batch []*commitReq, accepted []int, keys []docKey, states map[docKey]*docState) {
	type heads struct {
		dbs, ids, revs       []string
		deleted, hasGrants   []bool
		texts, bodies, chans []*string
		seqOffsets, times    []int64
	}
	var upd, ins heads
	for _, k := range keys {
		st := states[k]
		if st.last < 0 {
			continue
		}
		h := &upd
		if !st.found {
			h = &ins
		}
		w := batch[accepted[st.last]].w
		var text, body *string
		if !w.Deleted {
			t := string(w.Body)
			text = &t
			if bytes.Contains(w.Body, []byte(`\u`)) {
				if j := jsonbText(w.Body); j != t {
					body = &j
				}
			}
		}
		h.dbs, h.ids, h.revs = append(h.dbs, k.db), append(h.ids, k.id), append(h.revs, w.Rev)
		h.deleted, h.hasGrants = append(h.deleted, w.Deleted), append(h.hasGrants, st.hasGrants)
		h.texts, h.bodies, h.chans = append(h.texts, text), append(h.bodies, body), append(h.chans, channelsJSON(w.Channels))
		h.seqOffsets, h.times = append(h.seqOffsets, int64(st.last)+1), append(h.times, w.Time.UnixNano())
	}
	for _, q := range []struct {
		sql string
		h   *heads
	}{{sqlSaveHeads, &upd}, {sqlNewHeads, &ins}} {
		if h := q.h; len(h.dbs) > 0 {
			b.Queue(q.sql, app, n, h.dbs, h.ids, h.revs, h.deleted, h.texts, h.bodies, h.seqOffsets, h.times, h.chans, h.hasGrants)
		}
	}
}

// queueEvents adds the outbox rows of the accepted writes that have one.
// An event its committer asked to claim (EventSpec.ClaimUntil) is leased
// to this node and marked running as it goes in, when it is the first of
// its document in the batch, and no earlier live event of its
// document exists; Claimed tells the committer so once the batch commits.
func queueEvents(b *pgx.Batch, app, n int64, batch []*commitReq, accepted []int, node string) (claimed map[int64]bool) {
	var offsets, nextAt, origins, until []int64
	var depths []int32
	var dbs, ids []string
	seen := map[docKey]bool{}
	asked := false
	for j, i := range accepted {
		w := batch[i].w
		ev := w.Event
		if ev == nil {
			continue
		}
		k := docKey{w.DB, w.ID}
		var u int64
		if !ev.ClaimUntil.IsZero() && !seen[k] {
			u, asked = ev.ClaimUntil.UnixNano(), true
		}
		seen[k] = true
		dbs, ids = append(dbs, w.DB), append(ids, w.ID)
		offsets = append(offsets, int64(j)+1)
		depths = append(depths, int32(ev.Depth))
		nextAt = append(nextAt, ev.NextAt.UnixNano())
		origins = append(origins, ev.Origin)
		until = append(until, u)
	}
	if len(offsets) == 0 {
		return nil
	}
	if !asked {
		b.Queue(sqlAddEvents, app, n, offsets, depths, nextAt, origins, dbs, ids)
		return nil
	}
	// Filled as the batch's results are read.
	got := map[int64]bool{}
	b.Queue(sqlAddClaimedEvents, app, n, offsets, depths, nextAt, origins, dbs, ids, until, node).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var seq int64
			var leased bool
			if err := rows.Scan(&seq, &leased); err != nil {
				return err
			}
			got[seq] = leased
		}
		return rows.Err()
	})
	return got
}

// queueGrants brings grants (each live document's grants) and
// grant_counts (how many live documents give each grant) from what the
// database holds to what the batch leaves, by the tally every driver
// keeps (store.GrantTally): the new rows go in with one statement, and
// each grant's count moves once by its net change, with one statement for
// all of them. Only letting go of grants costs a statement each: one per
// document to drop its rows, one per grant whose count fell, to drop it
// at zero. Once the batch has run, the tally tells whether a grant
// appeared or vanished.
func queueGrants(b *pgx.Batch, app int64, keys []docKey, states map[docKey]*docState) *store.GrantTally {
	tally := &store.GrantTally{}
	var dbs, ids, kinds, principals, channels []string
	for _, k := range keys {
		st := states[k]
		if !tally.Replace(app, st.dbGrants, st.grants) {
			continue
		}
		if len(st.dbGrants) > 0 {
			b.Queue(sqlDropGrants, app, k.db, k.id)
		}
		for _, g := range st.grants {
			dbs, ids = append(dbs, k.db), append(ids, k.id)
			kinds, principals, channels = append(kinds, g.Kind), append(principals, g.Principal), append(channels, g.Channel)
		}
	}
	if len(dbs) > 0 {
		b.Queue(sqlAddGrants, app, dbs, ids, kinds, principals, channels)
	}
	counts := tally.Deltas()
	if len(counts) == 0 {
		return tally
	}
	// New slices: the batch holds the ones above until it is sent.
	ckinds, cprincipals, cchannels := make([]string, len(counts)), make([]string, len(counts)), make([]string, len(counts))
	ns := make([]int64, len(counts))
	byGrant := make(map[store.Grant]store.GrantDelta, len(counts))
	for i, d := range counts {
		ckinds[i], cprincipals[i], cchannels[i], ns[i] = d.Kind, d.Principal, d.Channel, d.Delta
		byGrant[d.Grant] = d
	}
	b.Queue(sqlCountGrants, app, ckinds, cprincipals, cchannels, ns).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var g store.Grant
			var n int64
			if err := rows.Scan(&g.Kind, &g.Principal, &g.Channel, &n); err != nil {
				return err
			}
			tally.Counted(byGrant[g], n)
		}
		return rows.Err()
	})
	for _, d := range counts {
		if d.Delta < 0 {
			b.Queue(sqlCountGone, app, d.Kind, d.Principal, d.Channel)
		}
	}
	return tally
}

// channelsJSON stores channels as a JSON array; nil stays NULL so "no
// access function" and "no channels" remain distinguishable.
func channelsJSON(ch []string) *string {
	if ch == nil {
		return nil
	}
	b, _ := json.Marshal(ch)
	s := string(b)
	return &s
}

func parseChannels(s *string) []string {
	if s == nil {
		return nil
	}
	ch := []string{}
	_ = json.Unmarshal([]byte(*s), &ch)
	return ch
}
