package store

import (
	"context"
	"time"
)

// Visitors keeps what an app's visitors sign in with beyond the users
// and tokens of Identity: single-use tickets and passkeys.
type Visitors interface {
	// RemoveToken revokes the one token with hash; ErrNotFound if none.
	RemoveToken(ctx context.Context, hash []byte) error
	// SetSignup sets the app's sign-up policy.
	SetSignup(ctx context.Context, appID int64, policy string) error

	// PutTicket stores a single-use ticket under its hash. Tickets that
	// expired before t.Created are dropped on the way.
	PutTicket(ctx context.Context, t Ticket) error
	// TakeTicket removes the app's ticket of kind under hash and returns
	// it, in one step, so two callers never both get it. ErrNotFound if
	// there is none or it expired before now.
	TakeTicket(ctx context.Context, appID int64, kind string, hash []byte, now time.Time) (*Ticket, error)

	// AddPasskey stores a visitor's passkey; ErrExists if its credential
	// id is taken.
	AddPasskey(ctx context.Context, p Passkey) error
	// Passkeys lists a visitor's passkeys, oldest first.
	Passkeys(ctx context.Context, user string) ([]Passkey, error)
	// PasskeyByID finds the passkey with credential id among the
	// visitors of app ("owner/name"); ErrNotFound if none.
	PasskeyByID(ctx context.Context, app string, id []byte) (*Passkey, error)
	// UpdatePasskey replaces a passkey's data (its signature counter
	// moves at each use); ErrNotFound if the user has no such passkey.
	UpdatePasskey(ctx context.Context, user string, id, data []byte) error
}

// Ticket is a single-use secret of an app: an invite code, or the state
// of a passkey ceremony between its two requests. Only its hash is kept.
type Ticket struct {
	AppID int64
	Kind  string
	Hash  []byte
	User  string // the visitor it is for, if any
	Data  []byte
	// Expires is when it stops being accepted; zero is never.
	Expires time.Time
	Created time.Time
}

// Passkey is a visitor's WebAuthn credential. Data is the credential as
// the WebAuthn library encodes it (public key, counter, flags).
type Passkey struct {
	User    string
	ID      []byte
	Data    []byte
	Created time.Time
}

// TicketArgs are t's values for the columns (hash, app_id, kind, user,
// data, expires, created); an Expires of zero is stored as 0.
func TicketArgs(t Ticket) []any {
	var expires int64
	if !t.Expires.IsZero() {
		expires = t.Expires.UnixNano()
	}
	return []any{t.Hash, t.AppID, t.Kind, t.User, t.Data, expires, t.Created.UnixNano()}
}

// ScanTakenTicket reads the (user, data, expires, created) a driver's
// delete of ticket (appID, kind, hash) returned. ErrNotFound if it
// expired before now: the delete removed it either way.
func ScanTakenTicket(row Row, appID int64, kind string, hash []byte, now time.Time) (*Ticket, error) {
	t := Ticket{AppID: appID, Kind: kind, Hash: hash}
	var expires, created int64
	if err := row.Scan(&t.User, &t.Data, &expires, &created); err != nil {
		return nil, err
	}
	t.Created = time.Unix(0, created)
	if expires != 0 {
		t.Expires = time.Unix(0, expires)
		if t.Expires.Before(now) {
			return nil, ErrNotFound
		}
	}
	return &t, nil
}
