package runner

// Work in progress, for a clock that counts it (clock.Virtual.Busy): a
// test on a virtual clock moves time only when the count is zero, so
// every wake-up must count from the moment it is sent until the look it
// causes is over, and hand on to what that look starts. The channels
// carry no count of their own: signal adds one for each signal that is
// queued, and each receiver gives back the ones it took (done) once it has
// acted on them and is about to wait again. Runs count from their start
// to their end (the handler's own waits on the clock are taken off by
// the JavaScript side), and stopping a version's runs counts until its
// last run has ended, since a stopped run wakes through its context.

// signal wakes whoever waits on ch; a pending wake-up is enough.
func (r *Runner) signal(ch chan struct{}) {
	if r.busy == nil {
		select {
		case ch <- struct{}{}:
		default:
		}
		return
	}
	r.busy(1)
	select {
	case ch <- struct{}{}:
	default:
		r.busy(-1) // one is queued already, and counted
	}
}

// working begins n pieces of work; done ends them.
func (r *Runner) working(n int) {
	if r.busy != nil {
		r.busy(n)
	}
}

// done ends the work of n signals received, or of n begun with working.
func (r *Runner) done(n int) {
	if r.busy != nil && n > 0 {
		r.busy(-n)
	}
}

// started counts a run of the live version and returns that version.
// Called under ar.mu.
func (ar *appRunner) started() int {
	ar.startedAs(ar.version)
	return ar.version
}

// startedAs counts a run of version. Called under ar.mu.
func (ar *appRunner) startedAs(version int) {
	if ar.r.busy != nil {
		ar.r.busy(1)
	}
	if ar.running == nil {
		ar.running = map[int]int{}
	}
	ar.running[version]++
}

// ended counts a run of version as ended; the last one of a stopped
// version ends the stop's work too.
func (ar *appRunner) ended(version int) {
	ar.mu.Lock()
	ar.running[version]--
	var stop func()
	if ar.running[version] == 0 {
		delete(ar.running, version)
		stop = ar.stopped[version]
		delete(ar.stopped, version)
	}
	ar.mu.Unlock()
	if stop != nil {
		stop()
	}
	if ar.r.busy != nil {
		ar.r.busy(-1)
	}
}

// stopping counts the stop of version's runs as work until the last of
// them has ended. Called under ar.mu.
func (ar *appRunner) stopping(version int) {
	if ar.r.busy == nil || ar.running[version] == 0 || ar.stopped[version] != nil {
		return
	}
	ar.r.busy(1)
	if ar.stopped == nil {
		ar.stopped = map[int]func(){}
	}
	ar.stopped[version] = func() { ar.r.busy(-1) }
}
