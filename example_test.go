package handoff_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/handoff-run/handoff"
	"github.com/handoff-run/handoff/errs"
)

// task is the document of the examples: a status and some work.
type task struct {
	ID     string `json:"_id,omitempty"`
	Rev    string `json:"_rev,omitempty"`
	Status string `json:"status"`
	Title  string `json:"title"`
}

// tasks is a transition table: a task starts as todo and moves to done
// once; whoever is signed in may write, and every task is public.
func tasks(w *handoff.Write) (handoff.Decision, error) {
	if w.User == nil {
		return handoff.Decision{}, handoff.Forbid("sign in to write tasks")
	}
	var t, was task
	if err := w.Doc.Decode(&t); err != nil {
		return handoff.Decision{}, err
	}
	public := handoff.Decision{Channels: []string{"tasks"}, Grant: handoff.Grant{Public: []string{"tasks"}}}
	if w.Old == nil {
		if t.Status != "todo" {
			return handoff.Decision{}, handoff.Forbid("a new task starts as todo")
		}
		return public, nil
	}
	if err := w.Old.Decode(&was); err != nil {
		return handoff.Decision{}, err
	}
	if was.Status+"->"+t.Status != "todo->done" {
		return handoff.Decision{}, handoff.Forbid("no transition from " + was.Status + " to " + t.Status)
	}
	return public, nil
}

// tempDir is the folder of an example's store.
func tempDir() string {
	dir, err := os.MkdirTemp("", "handoff-example-")
	if err != nil {
		log.Fatal(err)
	}
	return dir
}

// openTodo opens the app of Example in a temporary folder; done closes
// it and removes the folder.
func openTodo(ctx context.Context) (h *handoff.Instance, done func()) {
	dir := tempDir()
	h, err := handoff.Open(ctx, dir, handoff.Options{Apps: []handoff.App{{
		Name: "alice/todo", Public: true, Tables: map[string]handoff.Table{"tasks": tasks},
	}}})
	if err != nil {
		log.Fatal(err)
	}
	return h, func() { h.Close(); os.RemoveAll(dir) }
}

// A program opens handoff on a folder with its apps, then reads and
// writes as its users.
func Example() {
	ctx := context.Background()
	dir := tempDir()
	defer os.RemoveAll(dir)

	h, err := handoff.Open(ctx, dir, handoff.Options{Apps: []handoff.App{{
		Name:   "alice/todo",
		Public: true,
		Tables: map[string]handoff.Table{"tasks": tasks},
	}}})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()

	bob := h.As("alice/todo", "bob")
	if _, err := bob.Put(ctx, "tasks", "t1", task{Status: "todo", Title: "water the plants"}, handoff.PutOptions{}); err != nil {
		log.Fatal(err)
	}
	doc, err := bob.Get(ctx, "tasks", "t1")
	if err != nil {
		log.Fatal(err)
	}
	var t task
	if err := doc.Decode(&t); err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.ID, t.Status, t.Title)
	// Output: t1 todo water the plants
}

// A table refuses a write with Forbid; the writer gets code forbidden
// and the table's reason.
func ExampleForbid() {
	ctx := context.Background()
	h, done := openTodo(ctx)
	defer done()

	_, err := h.As("alice/todo", "bob").Put(ctx, "tasks", "t1", task{Status: "done"}, handoff.PutOptions{})
	var e *errs.Error
	if errors.As(err, &e) {
		fmt.Println(e.Code, "-", e.Reason)
	}
	// Output: forbidden - a new task starts as todo
}

// Two writers read the same revision and both try to move it: with
// IfRev, the second finds the head moved and gets code conflict instead
// of overwriting the first.
func ExampleDocs_Put() {
	ctx := context.Background()
	h, done := openTodo(ctx)
	defer done()
	bob, carol := h.As("alice/todo", "bob"), h.As("alice/todo", "carol")

	r, err := bob.Put(ctx, "tasks", "t1", task{Status: "todo"}, handoff.PutOptions{})
	if err != nil {
		log.Fatal(err)
	}
	_, err = bob.Put(ctx, "tasks", "t1", task{Status: "done"}, handoff.PutOptions{IfRev: r.Rev})
	fmt.Println("bob:", err)
	_, err = carol.Put(ctx, "tasks", "t1", task{Status: "done"}, handoff.PutOptions{IfRev: r.Rev})
	fmt.Println("carol's conflict:", errs.Is(err, errs.Conflict))
	// Output:
	// bob: <nil>
	// carol's conflict: true
}

// An onChange handler does the work of each new task and finishes it.
// Its write goes through the table like a user's, marked as the
// handler's, so the table can keep that step for it.
func ExampleOnChange() {
	ctx := context.Background()
	dir := tempDir()
	defer os.RemoveAll(dir)

	finished := make(chan string, 1)
	table := func(w *handoff.Write) (handoff.Decision, error) {
		if w.Old != nil {
			// Only the handler finishes a task.
			if err := w.RequireBackend(handoff.HandlerOnChange); err != nil {
				return handoff.Decision{}, err
			}
		}
		return tasks(w)
	}
	finish := func(ctx context.Context, c handoff.Change, db *handoff.Docs) error {
		var t task
		if err := c.Doc.Decode(&t); err != nil || t.Status != "todo" {
			return err
		}
		t.Status = "done"
		// Compare-and-set on the revision this run was for: a second
		// delivery of the same commit finds the task moved and stops.
		_, err := db.Put(ctx, c.DB, c.ID, t, handoff.PutOptions{IfRev: t.Rev})
		if errs.Is(err, errs.Conflict) {
			return nil
		}
		if err == nil {
			finished <- c.ID
		}
		return err
	}
	h, err := handoff.Open(ctx, dir, handoff.Options{Apps: []handoff.App{{
		Name:     "alice/todo",
		Public:   true,
		Tables:   map[string]handoff.Table{"tasks": table},
		OnChange: handoff.OnChange{Handle: finish, When: map[string][]any{"status": {"todo"}}},
	}}})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()

	bob := h.As("alice/todo", "bob")
	if _, err := bob.Put(ctx, "tasks", "t1", task{Status: "todo"}, handoff.PutOptions{}); err != nil {
		log.Fatal(err)
	}
	<-finished
	history, err := bob.History(ctx, "tasks", "t1")
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range history {
		var t task
		if err := r.Doc.Decode(&t); err != nil {
			log.Fatal(err)
		}
		by := r.User
		if r.Handler != "" {
			by += "'s " + r.Handler
		}
		fmt.Println(t.Status, "by", by)
	}
	// Output:
	// todo by bob
	// done by bob's onChange
}
