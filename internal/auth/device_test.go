package auth

import (
	"strings"
	"testing"
	"time"
)

func TestSignVerify(t *testing.T) {
	k, err := NewDeviceKey("alice", "ci")
	if err != nil {
		t.Fatal(err)
	}
	k2, err := ParseDeviceKey(k.Encode())
	if err != nil || k2.User != "alice" || k2.Name != "ci" || !k2.Public().Equal(k.Public()) {
		t.Fatalf("round trip: %+v %v", k2, err)
	}
	now := time.Unix(1_800_000_000, 0)
	h := k.Sign("PUT", "/v1/apps/a/b/dbs/d/docs/x?ifRev=1-a", []byte(`{"a":1}`), now)
	cred, ok := strings.CutPrefix(h, SchemeDevice+" ")
	if !ok {
		t.Fatalf("header %q", h)
	}
	s, err := ParseSigned(cred)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(k.Public(), "PUT", "/v1/apps/a/b/dbs/d/docs/x?ifRev=1-a", []byte(`{"a":1}`), now.Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	for name, check := range map[string]func() error{
		"other body": func() error {
			return s.Verify(k.Public(), "PUT", "/v1/apps/a/b/dbs/d/docs/x?ifRev=1-a", []byte(`{"a":2}`), now)
		},
		"other path": func() error {
			return s.Verify(k.Public(), "PUT", "/v1/apps/a/b/dbs/d/docs/y?ifRev=1-a", []byte(`{"a":1}`), now)
		},
		"other method": func() error {
			return s.Verify(k.Public(), "DELETE", "/v1/apps/a/b/dbs/d/docs/x?ifRev=1-a", []byte(`{"a":1}`), now)
		},
		"expired": func() error {
			return s.Verify(k.Public(), "PUT", "/v1/apps/a/b/dbs/d/docs/x?ifRev=1-a", []byte(`{"a":1}`), now.Add(2*time.Minute))
		},
		"other key": func() error {
			other, _ := NewDeviceKey("alice", "ci")
			return s.Verify(other.Public(), "PUT", "/v1/apps/a/b/dbs/d/docs/x?ifRev=1-a", []byte(`{"a":1}`), now)
		},
	} {
		if check() == nil {
			t.Errorf("%s: verified", name)
		}
	}
	// Before the body: the rest of the token holds; the body is its own check.
	if err := s.VerifyRequest(k.Public(), "PUT", "/v1/apps/a/b/dbs/d/docs/x?ifRev=1-a", now); err != nil {
		t.Fatal(err)
	}
	if s.VerifyBody([]byte(`{"a":1}`)) != nil || s.VerifyBody([]byte(`{"a":2}`)) == nil {
		t.Error("VerifyBody does not tell the signed body from another")
	}
	var r Replays
	if !r.Fresh(s.NonceKey(), now) || r.Fresh(s.NonceKey(), now.Add(time.Second)) {
		t.Fatal("a token was accepted twice")
	}
	if _, err := ParseDeviceKey("hdv1.garbage"); err == nil {
		t.Fatal("a damaged credential parsed")
	}
}
