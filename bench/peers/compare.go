package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
)

// handoffModule is the first line of the product's go.mod.
const handoffModule = "module github.com/handoff-run/handoff"

// CompareOptions configure an interleaved run.
type CompareOptions struct {
	common
	Rounds   int
	Modes    []string // River modes, each run once a round after handoff
	Handoff  string   // the handoff binary; "" builds it from Repo
	Repo     string   // the product's checkout; "" finds it above the working directory
	Handlers string   // `handoff bench jobs --handlers`
	// Self is the command that runs a River round (`peers river`): this
	// executable unless set.
	Self []string
	// Out, when set, gets every round's results as JSON.
	Out string
}

func compareCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o CompareOptions
	fs := o.flags("compare", stderr)
	modes := fs.String("modes", ModeOne+","+ModeMany, "River modes to run each round, comma-separated")
	fs.IntVar(&o.Rounds, "rounds", 3, "rounds; each runs handoff, then each River mode")
	fs.StringVar(&o.Handoff, "handoff", "", "handoff binary to run (default: build ./cmd/handoff of the checkout above)")
	fs.StringVar(&o.Repo, "repo", "", "the handoff checkout to build (default: found above the working directory)")
	fs.StringVar(&o.Handlers, "handlers", "js", "handoff bench jobs --handlers: js (examples/jobs) or go")
	fs.StringVar(&o.Out, "out", "", "also write every round's results to this JSON file")
	if err := o.parse(fs, args); err != nil {
		return err
	}
	if o.Rounds < 1 {
		return usageError(fmt.Sprintf("--rounds must be at least 1, got %d", o.Rounds))
	}
	for m := range strings.SplitSeq(*modes, ",") {
		if m != ModeOne && m != ModeMany {
			return usageError(fmt.Sprintf("--modes takes river and river-many, got %q", m))
		}
		o.Modes = append(o.Modes, m)
	}
	return Compare(ctx, o, stdout, stderr)
}

// Compare runs handoff and River in turn, each round in fresh processes
// on fresh stores, and prints the table to w; progress goes to log.
func Compare(ctx context.Context, o CompareOptions, w, log io.Writer) error {
	if o.store == StorePostgres {
		if err := pingPostgres(ctx, o.postgres); err != nil {
			return err
		}
	}
	if o.Handoff == "" {
		bin, cleanup, err := buildHandoff(ctx, o.Repo, log)
		if err != nil {
			return err
		}
		defer cleanup()
		o.Handoff = bin
	}
	if o.Self == nil {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		o.Self = []string{self}
	}
	loadBefore := loadAverage()
	fmt.Fprintf(log, "compare: %s, %d jobs, %d producers, %d rounds; load average %s\n",
		o.store, o.jobs, o.concurrency, o.Rounds, loadBefore)

	var all [][]*Result
	for r := 1; r <= o.Rounds; r++ {
		var round []*Result
		sides := append([]string{"handoff"}, o.Modes...)
		for _, side := range sides {
			fmt.Fprintf(log, "  round %d: %s …\n", r, side)
			res, err := o.runSide(ctx, side)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r, side, err)
			}
			res.Side = side
			round = append(round, res)
		}
		all = append(all, round)
	}
	loadAfter := loadAverage()
	fmt.Fprintf(w, "%s, %d jobs, %d producers, %d rounds; load average before %s, after %s\n",
		o.store, o.jobs, o.concurrency, o.Rounds, loadBefore, loadAfter)
	printRounds(w, all, o.store == StorePostgres)
	if o.Out != "" {
		b, err := json.MarshalIndent(map[string]any{"load_before": loadBefore, "load_after": loadAfter, "rounds": all}, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.Out, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	for _, round := range all {
		for _, res := range round {
			if !res.OK {
				return fmt.Errorf("%s: not every job completed exactly once", res.Side)
			}
		}
	}
	return nil
}

// runSide runs one side's round in a process of its own and reads its
// JSON result. On PostgreSQL it also counts the CPU time of the server's
// backends for the round's database, the same way for both sides.
func (o *CompareOptions) runSide(ctx context.Context, side string) (*Result, error) {
	var argv []string
	prefix := "river_bench_"
	if side == "handoff" {
		argv = []string{o.Handoff, "bench", "jobs", "--quiet", "--jobs", fmt.Sprint(o.jobs),
			"--concurrency", fmt.Sprint(o.concurrency), "--handlers", o.Handlers}
		if o.store == StorePostgres {
			argv = append(argv, "--postgres", o.postgres)
		}
		prefix = "handoff_bench_"
	} else {
		argv = append(append([]string{}, o.Self...), o.riverArgs(side)...)
	}
	var server *serverCPU
	if o.store == StorePostgres {
		server = watchServerCPU(prefix, 100*time.Millisecond)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var serverTime time.Duration
	if server != nil {
		serverTime = server.stop()
	}
	var res Result
	if jerr := json.Unmarshal(stdout.Bytes(), &res); jerr != nil {
		if err == nil {
			err = jerr
		}
		return nil, fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, tail(stderr.String()))
	}
	// A run that printed its result but failed its check is reported
	// with OK false, not dropped.
	if res.Jobs > 0 {
		res.ServerCPUMsPerJob = ms(serverTime) / float64(res.Jobs)
	}
	return &res, nil
}

// tail is the last lines of a process's stderr, for an error message.
func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-10):], "\n")
}

// printRounds writes one row a side a round, then the spread of the
// ratios handoff/River over the rounds.
func printRounds(w io.Writer, all [][]*Result, server bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "round\tside\tjobs/s\tCPU ms/job\t"
	if server {
		head += "server CPU ms/job\t"
	}
	fmt.Fprintln(tw, head+"p50 ms\tp99 ms\thandoff/side jobs/s\tside/handoff CPU\t")
	jobsRatio := map[string][]float64{}
	cpuRatio := map[string][]float64{}
	var order []string
	for i, round := range all {
		h := round[0]
		for _, r := range round {
			row := fmt.Sprintf("%d\t%s\t%.0f\t%.3f\t", i+1, r.Side, r.JobsPerSec, r.CPUMsPerJob)
			if server {
				row += fmt.Sprintf("%.3f\t", r.ServerCPUMsPerJob)
			}
			row += fmt.Sprintf("%.2f\t%.2f\t", r.Delivery.P50, r.Delivery.P99)
			if r == h {
				row += "\t\t"
			} else {
				jr, cr := h.JobsPerSec/r.JobsPerSec, r.CPUMsPerJob/h.CPUMsPerJob
				row += fmt.Sprintf("%.2f\t%.2f\t", jr, cr)
				if _, ok := jobsRatio[r.Side]; !ok {
					order = append(order, r.Side)
				}
				jobsRatio[r.Side] = append(jobsRatio[r.Side], jr)
				cpuRatio[r.Side] = append(cpuRatio[r.Side], cr)
			}
			if !r.OK {
				row += " NOT OK"
			}
			fmt.Fprintln(tw, row)
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "ratio over rounds\tside\tmin\tmedian\tmax\t")
	for _, side := range order {
		for _, rr := range []struct {
			name string
			xs   []float64
		}{{"handoff/side jobs/s", jobsRatio[side]}, {"side/handoff CPU per job", cpuRatio[side]}} {
			lo, hi := rr.xs[0], rr.xs[0]
			for _, x := range rr.xs {
				lo, hi = min(lo, x), max(hi, x)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.2f\t\n", rr.name, side, lo, median(append([]float64{}, rr.xs...)), hi)
		}
	}
	tw.Flush()
}

// loadAverage is the machine's 1, 5 and 15 minute load averages.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// pingPostgres checks, before any round, that the server answers.
func pingPostgres(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("%w: %v", errNoPostgres, err)
	}
	return conn.Close(context.Background())
}

// buildHandoff builds ./cmd/handoff of the checkout into a temporary
// directory; cleanup removes it.
func buildHandoff(ctx context.Context, repo string, log io.Writer) (string, func(), error) {
	if repo == "" {
		var err error
		if repo, err = findRepo(); err != nil {
			return "", nil, err
		}
	}
	dir, err := os.MkdirTemp("", "peers-handoff-")
	if err != nil {
		return "", nil, err
	}
	bin := filepath.Join(dir, "handoff")
	fmt.Fprintf(log, "compare: building %s/cmd/handoff\n", repo)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/handoff")
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("building handoff in %s: %v\n%s", repo, err, out)
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

// findRepo is the nearest directory above the working one whose go.mod
// is the product's.
func findRepo() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			sc := bufio.NewScanner(f)
			first := sc.Scan() && strings.TrimSpace(sc.Text()) == handoffModule
			f.Close()
			if first {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", usageError("no handoff checkout above the working directory: run from bench/peers, or pass --repo DIR or --handoff BIN")
		}
		dir = parent
	}
}
