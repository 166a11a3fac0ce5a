package kjit

/*
#include <kjit/kjit.h>
extern void kjitgoLog(int level, char* message, void* user);
static void kjitgo_set_log(int on) {
  kjit_set_log_callback(on ? (kjit_log_fn)kjitgoLog : NULL, NULL);
}
*/
import "C"

import (
	"strconv"
	"sync/atomic"
)

// LogLevel is the severity of a log message.
type LogLevel int

// Log levels.
const (
	LogDebug LogLevel = 0
	LogInfo  LogLevel = 1
	LogWarn  LogLevel = 2
	LogError LogLevel = 3
)

// String is "debug", "info", "warn" or "error" (LogLevel(N) otherwise).
func (l LogLevel) String() string {
	switch l {
	case LogDebug:
		return "debug"
	case LogInfo:
		return "info"
	case LogWarn:
		return "warn"
	case LogError:
		return "error"
	}
	return "LogLevel(" + strconv.Itoa(int(l)) + ")"
}

type logHolder struct{ f func(LogLevel, string) }

var logCallback atomic.Value // logHolder

// SetLogCallback routes the library's diagnostics to f (nil restores the default, which
// writes to stderr when KJIT_LOG is set). f may run on any goroutine and OS thread,
// including the library's worker threads, and must not call kjit.
func SetLogCallback(f func(level LogLevel, message string)) {
	logCallback.Store(logHolder{f})
	if f == nil {
		C.kjitgo_set_log(0)
	} else {
		C.kjitgo_set_log(1)
	}
}
