// Command embed runs a job queue inside a Go program with package
// handoff: the transition table and the onChange handler are Go
// functions (jobs.go), the store is a folder on disk, and a job's walk
// pending → running → done is kept in its history.
//
//	go run ./examples/embed
//	go run ./examples/embed -data ./queue-data "count these words"
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"

	"github.com/handoff-run/handoff"
)

func main() {
	data := flag.String("data", "", "the store's folder; default a temporary one, removed at the end")
	flag.Parse()
	input := strings.Join(flag.Args(), " ")
	if input == "" {
		input = "count the words of this job"
	}
	dir := *data
	if dir == "" {
		tmp, err := os.MkdirTemp("", "handoff-embed-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	if err := run(context.Background(), dir, input, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run opens handoff in dir with the queue, queues one job as bob, waits
// until the handler finished it, and prints the job's history.
func run(ctx context.Context, dir, input string, out io.Writer) error {
	q := &queue{done: make(chan string)}
	h, err := handoff.Open(ctx, dir, handoff.Options{Apps: []handoff.App{q.app()}})
	if err != nil {
		return err
	}
	defer h.Close()

	bob := h.As("demo/queue", "bob")
	r, err := bob.Put(ctx, "jobs", "", job{Status: "pending", Input: input}, handoff.PutOptions{})
	if err != nil {
		return err
	}
	for id := ""; id != r.ID; {
		select {
		case id = <-q.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	history, err := bob.History(ctx, "jobs", r.ID)
	if err != nil {
		return err
	}
	for _, rev := range history {
		var j job
		if err := rev.Doc.Decode(&j); err != nil {
			return err
		}
		by := rev.User
		if rev.Handler != "" {
			by += "'s " + rev.Handler
		}
		fmt.Fprintf(out, "%s by %s", j.Status, by)
		if j.Output != nil {
			fmt.Fprintf(out, ": %d words", j.Output["words"])
		}
		fmt.Fprintln(out)
	}
	return nil
}
