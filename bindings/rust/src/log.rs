//! The library's log callback.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::ptr;

use crate::sys;

/// Severity of a log message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

/// A log callback: see [`set_log_callback`].
pub type LogFn = dyn Fn(LogLevel, &str) + Send + Sync;

unsafe extern "C" fn log_trampoline(level: c_int, message: *const c_char, user: *mut c_void) {
    let f = &*(user as *const Box<LogFn>);
    let level = match level {
        0 => LogLevel::Debug,
        1 => LogLevel::Info,
        2 => LogLevel::Warn,
        _ => LogLevel::Error,
    };
    let msg = if message.is_null() {
        std::borrow::Cow::Borrowed("")
    } else {
        CStr::from_ptr(message).to_string_lossy()
    };
    // A panic must not unwind into C.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(level, &msg)));
}

/// Routes the library's diagnostics to `callback` (`None` restores the default, which
/// writes to stderr when `KJIT_LOG` is set). The callback may run on any thread,
/// including the library's workers, and must not call kjit.
///
/// The library may still be inside a previous callback when it is replaced, so a replaced
/// callback is never freed (one small allocation per call of this function).
pub fn set_log_callback(callback: Option<Box<LogFn>>) {
    match callback {
        None => unsafe { sys::kjit_set_log_callback(None, ptr::null_mut()) },
        Some(cb) => {
            let user = Box::into_raw(Box::new(cb)) as *mut c_void;
            unsafe { sys::kjit_set_log_callback(Some(log_trampoline), user) }
        }
    }
}
