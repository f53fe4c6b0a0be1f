// Package workers runs short tasks on goroutines that are kept between
// tasks.
//
// A handler's run and a handler's database call each used to start a
// goroutine of their own. Inside the JavaScript engine such a goroutine
// grows its stack from a few KB to tens of KB, copying it at each doubling,
// and on the job bench that copying was a twentieth of the server's CPU.
// A kept goroutine grows once; the garbage collector shrinks an idle one
// only by halves.
package workers

import "time"

// idleFor is how long a goroutine waits for its next task before it
// ends, so a burst leaves no goroutines behind for long.
const idleFor = 5 * time.Second

// tasks hands a task to a waiting goroutine. It is unbuffered: a send
// succeeds only if one is waiting, and otherwise Go starts another.
var tasks = make(chan func())

// Go runs fn on a goroutine of its own, as the go statement does, but
// on one kept from an earlier task when one is free.
func Go(fn func()) {
	select {
	case tasks <- fn:
	default:
		go work(fn)
	}
}

func work(fn func()) {
	var idle *time.Timer
	for {
		fn()
		fn = nil // let the task's memory go while this one waits
		if idle == nil {
			idle = time.NewTimer(idleFor)
		} else {
			idle.Reset(idleFor)
		}
		select {
		case fn = <-tasks:
		case <-idle.C:
			return
		}
	}
}
