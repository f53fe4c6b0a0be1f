package auth

import (
	"context"
	"strings"
	"testing"
)

func TestPasswordHash(t *testing.T) {
	ctx := context.Background()
	h, err := HashPassword(ctx, "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") || strings.Contains(h, "correct horse") {
		t.Fatalf("hash = %q, want an encoded argon2id hash", h)
	}
	h2, _ := HashPassword(ctx, "correct horse")
	if h == h2 {
		t.Fatal("two hashes of one password are equal: the salt is not random")
	}
	for _, c := range []struct {
		pw, hash string
		want     bool
	}{
		{"correct horse", h, true},
		{"correct horse", h2, true},
		{"correct horsE", h, false},
		{"", h, false},
		{"correct horse", "", false}, // a missing user
	} {
		ok, err := CheckPassword(ctx, c.pw, c.hash)
		if err != nil || ok != c.want {
			t.Errorf("CheckPassword(%q, %.20q) = %v, %v; want %v", c.pw, c.hash, ok, err, c.want)
		}
	}
	if _, err := CheckPassword(ctx, "x", "$2a$10$bcrypt"); err == nil {
		t.Error("a hash of another kind was accepted")
	}
}

func TestPasswordHashWaitsForSlot(t *testing.T) {
	// Every slot taken: a hash waits, and gives up with its context.
	for range cap(hashSlots) {
		hashSlots <- struct{}{}
	}
	defer func() {
		for range cap(hashSlots) {
			<-hashSlots
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := HashPassword(ctx, "correct horse"); err == nil {
		t.Fatal("HashPassword ran with every slot taken")
	}
	// With the queue full too, a hash is turned away at once.
	hashWaiters.Add(maxHashWaiters)
	defer hashWaiters.Add(-maxHashWaiters)
	if _, err := CheckPassword(context.Background(), "correct horse", ""); err != ErrBusy {
		t.Fatalf("CheckPassword with the queue full: %v, want ErrBusy", err)
	}
}

func BenchmarkHashPassword(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		if _, err := HashPassword(ctx, "correct horse battery"); err != nil {
			b.Fatal(err)
		}
	}
}
