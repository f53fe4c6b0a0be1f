package identity

import (
	"context"
	"errors"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/store"
)

// Recheck reports whether the credential a was built from still holds:
// its bearer token was not revoked (signed out, replaced, its user
// removed), its device was not revoked. A request is authenticated once,
// when it arrives; a live feed stays open for hours, so it asks again
// whenever a credential may have changed. Anonymous and handler actors
// hold no credential and always pass.
func (e *Service) Recheck(ctx context.Context, a Actor) error {
	switch {
	case a.User == "" || a.Handler != "":
		return nil
	case a.Device != "":
		d, err := e.st.Device(ctx, a.User, a.Device)
		if errors.Is(err, store.ErrNotFound) {
			return errs.New(errs.Unauthorized, "device %s of user %s is no longer registered (its user was removed); add a new device with `handoff device add`", a.Device, a.User)
		}
		if err != nil {
			return errs.Storage(err)
		}
		if !d.Revoked.IsZero() || (a.deviceKey != "" && string(d.PublicKey) != a.deviceKey) {
			return errs.New(errs.Unauthorized, "device %s of user %s was revoked; sign with its current key (`handoff device add` made a new one)", a.Device, a.User)
		}
		return nil
	case a.session != "":
		u, err := e.st.UserByToken(ctx, []byte(a.session))
		if errors.Is(err, store.ErrNotFound) || (err == nil && u.Name != a.User) {
			if a.Visitor() {
				return errs.New(errs.Unauthorized, "the token was revoked (signed out, or the visitor was removed); sign in again on the app's page")
			}
			return errs.New(errs.Unauthorized, "the token was revoked (replaced, or its user removed); use the new token, or ask the admin for one (`handoff user token NAME`)")
		}
		if err != nil {
			return errs.Storage(err)
		}
		return nil
	}
	return nil
}
