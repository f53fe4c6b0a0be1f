package engine

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"regexp"
	"strconv"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/store"
)

// Secrets are sealed with AES-256-GCM under the server key before they
// reach the store, with the app and name as associated data, so a sealed
// value copied to another app or name does not open.

var secretNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// maxSecretBytes bounds one secret value.
const maxSecretBytes = 64 << 10

func (e *Engine) aead() (cipher.AEAD, error) {
	if len(e.secretKey) != 32 {
		return nil, errs.New(errs.Unavailable, "this server has no secret key, so it cannot keep secrets; start it with `handoff serve`, which makes one in the data directory")
	}
	block, err := aes.NewCipher(e.secretKey)
	if err != nil {
		return nil, internal(err)
	}
	return cipher.NewGCM(block)
}

func secretAD(appID int64, name string) []byte {
	return []byte(strconv.FormatInt(appID, 10) + "/" + name)
}

// SetSecret stores a secret of the app. Only the owner and the admin.
func (e *Engine) SetSecret(ctx context.Context, a Actor, appRef, name string, value []byte) error {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return err
	}
	if err := e.mayAdmin(a, app); err != nil {
		return err
	}
	if !secretNameRE.MatchString(name) {
		return errs.New(errs.Invalid, "secret name %q must be a JavaScript identifier of letters, digits and '_' (ctx.secrets.NAME)", name)
	}
	if len(value) > maxSecretBytes {
		return errs.New(errs.TooLarge, "the secret is %d bytes; the limit is %d", len(value), maxSecretBytes)
	}
	aead, err := e.aead()
	if err != nil {
		return err
	}
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	sealed := aead.Seal(nonce, nonce, value, secretAD(app.ID, name))
	if err := e.st.PutSecret(ctx, app.ID, name, sealed, e.clock.Now()); err != nil {
		return internal(err)
	}
	e.forgetSecrets(app.ID)
	return nil
}

// SecretInfo names a secret; values never leave the server.
type SecretInfo struct {
	Name    string    `json:"name"`
	Updated time.Time `json:"updated"`
}

// ListSecrets lists the names of the app's secrets.
func (e *Engine) ListSecrets(ctx context.Context, a Actor, appRef string) ([]SecretInfo, error) {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return nil, err
	}
	if err := e.mayAdmin(a, app); err != nil {
		return nil, err
	}
	ss, err := e.st.Secrets(ctx, app.ID)
	if err != nil {
		return nil, internal(err)
	}
	out := make([]SecretInfo, len(ss))
	for i, s := range ss {
		out[i] = SecretInfo{Name: s.Name, Updated: s.Updated.UTC()}
	}
	return out, nil
}

// RemoveSecret deletes a secret of the app.
func (e *Engine) RemoveSecret(ctx context.Context, a Actor, appRef, name string) error {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return err
	}
	if err := e.mayAdmin(a, app); err != nil {
		return err
	}
	err = store.ErrNotFound
	if secretNameRE.MatchString(name) {
		err = e.st.DeleteSecret(ctx, app.ID, name)
	}
	if errors.Is(err, store.ErrNotFound) {
		return errs.New(errs.NotFound, "app %s has no secret %q; list them with `handoff secret list --app %s`", appRef, name, appRef)
	}
	if err != nil {
		return internal(err)
	}
	e.forgetSecrets(app.ID)
	return nil
}

// appSecrets opens the app's secrets for its handlers, once per change.
func (e *Engine) appSecrets(app *appState) map[string]string {
	if v, ok := e.secrets.Load(app.ID); ok {
		return v.(map[string]string)
	}
	out := map[string]string{}
	gen := e.gen.Load()
	ss, err := e.st.Secrets(context.Background(), app.ID)
	if err != nil {
		e.log.Error("reading app secrets", "app", app.ref(), "err", err)
		return out
	}
	aead, err := e.aead()
	if err != nil {
		return out
	}
	for _, s := range ss {
		n := aead.NonceSize()
		if len(s.Sealed) < n {
			continue
		}
		plain, err := aead.Open(nil, s.Sealed[:n], s.Sealed[n:], secretAD(app.ID, s.Name))
		if err != nil {
			e.log.Error("a secret does not open with this server's key", "app", app.ref(), "secret", s.Name)
			continue
		}
		out[s.Name] = string(plain)
	}
	e.secrets.Store(app.ID, out)
	if e.gen.Load() != gen {
		// Dropped while it was read: what was read may be stale.
		e.secrets.Delete(app.ID)
	}
	return out
}
