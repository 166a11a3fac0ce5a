//! Status codes and the error type of every fallible call.

use std::fmt;
use std::os::raw::c_int;

use crate::cstr::cstr_or_empty;
use crate::status_string;
use crate::sys;

/// A `kjit_status` value. The numbers are stable (see `include/kjit/common.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    Ok,
    InvalidArgument,
    InvalidHandle,
    OutOfMemory,
    InvalidSource,
    Compile,
    InvalidOption,
    UnsupportedTarget,
    NameNotFound,
    Nvrtc,
    Cache,
    CacheCorrupt,
    NotFound,
    ReadOnly,
    CudaUnavailable,
    Cuda,
    ArgumentMismatch,
    StaleHandle,
    CudaSticky,
    Unsupported,
    Cancelled,
    Timeout,
    BufferTooSmall,
    Cublas,
    Io,
    /// nvJitLink reported a link error; [`Error::log`] has its log (since 0.2).
    Link,
    /// nvJitLink not available, or failed internally (since 0.2).
    NvJitLink,
    Internal,
    /// A status this version of the bindings does not know.
    Other(i32),
}

impl Status {
    /// Maps a C status code.
    pub fn from_raw(code: i32) -> Status {
        use Status::*;
        match code {
            0 => Ok,
            1 => InvalidArgument,
            2 => InvalidHandle,
            3 => OutOfMemory,
            4 => InvalidSource,
            5 => Compile,
            6 => InvalidOption,
            7 => UnsupportedTarget,
            8 => NameNotFound,
            9 => Nvrtc,
            10 => Cache,
            11 => CacheCorrupt,
            12 => NotFound,
            13 => ReadOnly,
            14 => CudaUnavailable,
            15 => Cuda,
            16 => ArgumentMismatch,
            17 => StaleHandle,
            18 => CudaSticky,
            19 => Unsupported,
            20 => Cancelled,
            21 => Timeout,
            22 => BufferTooSmall,
            23 => Cublas,
            24 => Io,
            25 => Link,
            26 => NvJitLink,
            99 => Internal,
            n => Other(n),
        }
    }

    /// The C status code.
    pub fn raw(self) -> i32 {
        use Status::*;
        match self {
            Ok => 0,
            InvalidArgument => 1,
            InvalidHandle => 2,
            OutOfMemory => 3,
            InvalidSource => 4,
            Compile => 5,
            InvalidOption => 6,
            UnsupportedTarget => 7,
            NameNotFound => 8,
            Nvrtc => 9,
            Cache => 10,
            CacheCorrupt => 11,
            NotFound => 12,
            ReadOnly => 13,
            CudaUnavailable => 14,
            Cuda => 15,
            ArgumentMismatch => 16,
            StaleHandle => 17,
            CudaSticky => 18,
            Unsupported => 19,
            Cancelled => 20,
            Timeout => 21,
            BufferTooSmall => 22,
            Cublas => 23,
            Io => 24,
            Link => 25,
            NvJitLink => 26,
            Internal => 99,
            Other(n) => n,
        }
    }

    /// The library's English name of the status (`kjit_status_string`).
    pub fn description(self) -> &'static str {
        status_string(self.raw())
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.description())
    }
}

/// The error of every fallible call: the status, the library's message (from
/// `kjit_last_error`, read on the same thread right after the call) and, for
/// [`Status::Compile`], NVRTC's full log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub(crate) status: Status,
    pub(crate) message: String,
    pub(crate) log: String,
}

impl Error {
    pub fn status(&self) -> Status {
        self.status
    }
    /// What failed, with which input, and why. May be empty.
    pub fn message(&self) -> &str {
        &self.message
    }
    /// NVRTC's log for compile errors; empty otherwise.
    pub fn log(&self) -> &str {
        &self.log
    }

    /// Builds an error for a failed call: reads the calling thread's `kjit_last_error()`.
    /// Must be called right after the failing kjit call, on the same thread.
    pub(crate) fn last(code: c_int) -> Error {
        let message = unsafe { cstr_or_empty(sys::kjit_last_error()) }.to_string();
        Error {
            status: Status::from_raw(code),
            message,
            log: String::new(),
        }
    }

    /// An error detected by the bindings before calling the library.
    pub(crate) fn local(status: Status, message: impl Into<String>) -> Error {
        Error {
            status,
            message: message.into(),
            log: String::new(),
        }
    }
}

/// `{}` prints the status and the message; `{:#}` (alternate) adds NVRTC's log on the
/// lines after it, which [`Error::log`] also gives. So printing an error and then its log
/// shows the log once.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.status)?;
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        if f.alternate() && !self.log.is_empty() {
            write!(f, "\n{}", self.log.trim_end())?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

#[inline]
pub(crate) fn check(code: c_int) -> Result<()> {
    if code == sys::KJIT_OK {
        Ok(())
    } else {
        Err(Error::last(code))
    }
}
