package kjit

/*
#include <kjit/kjit.h>
*/
import "C"

import (
	"context"
	"errors"
	"time"
)

// waitSlice bounds how long one kjit_future_wait call blocks while a context is watched:
// a context that ends is noticed within this time.
const waitSlice = 10 * time.Millisecond

// CompileContext is Compile under a context: it runs the compile on the worker pool and
// returns what Compile would have, unless ctx ends first. Then the compile is cancelled,
// its future and any result it still produces are freed by the library, and the error is
// an *Error with StatusCancelled (ctx cancelled) or StatusTimeout (deadline passed) that
// also matches ctx.Err() with errors.Is (context.Canceled, context.DeadlineExceeded).
// A ctx that has already ended compiles nothing.
func (c *Compiler) CompileContext(ctx context.Context, source string, opts *Options) (*Binary, error) {
	if err := ctx.Err(); err != nil {
		return nil, contextError(err, "the compile was not started")
	}
	f, err := c.CompileAsync(source, opts)
	if err != nil {
		return nil, err
	}
	// Close cancels a compile that is still running and drops its result: nothing leaks
	// whichever of the compile and ctx ends first.
	defer f.Close()
	return f.WaitContext(ctx)
}

// WaitContext waits for the compile until ctx ends and returns what Compile would have.
// When ctx ends first the compile is cancelled (kjit_future_cancel) and the error is an
// *Error with StatusCancelled or StatusTimeout that also matches ctx.Err() with
// errors.Is; the future stays the caller's to Close (a later Wait returns
// StatusCancelled, or the result if the compile had already finished). A result that is
// ready when ctx ends is returned, not dropped. One waiter at a time, as for Wait.
func (f *Future) WaitContext(ctx context.Context) (*Binary, error) {
	done := ctx.Done()
	for {
		slice := waitSlice
		if dl, ok := ctx.Deadline(); ok {
			if left := time.Until(dl); left < slice {
				// Whole milliseconds (the C API's unit), rounded up: no busy polling.
				slice = (left + time.Millisecond - 1).Truncate(time.Millisecond)
			}
		}
		if slice < 0 {
			slice = 0
		}
		if done == nil { // a context that can never end: one blocking wait
			slice = -1
		}
		bin, err := f.Wait(slice)
		if !errors.Is(err, StatusTimeout) || slice < 0 {
			return bin, err
		}
		// StatusTimeout means "not done yet", or the compile's own result when it ran past
		// its time limit (worker mode). A ready future tells them apart: its result is
		// still there only in the first case ("result already taken" in the second).
		if f.Ready() {
			if bin, again := f.Wait(0); !errors.Is(again, StatusInvalidArgument) {
				return bin, again
			}
			return nil, err
		}
		if cerr := ctx.Err(); cerr != nil {
			_ = f.Cancel()
			return nil, contextError(cerr, "the compile was cancelled")
		}
	}
}

// contextError is the error of a compile given up because its context ended: an *Error
// whose Is also matches the context's error.
func contextError(ctxErr error, what string) error {
	st := StatusCancelled
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		st = StatusTimeout
	}
	return &Error{Status: st, Message: ctxErr.Error() + ": " + what, cause: ctxErr}
}
